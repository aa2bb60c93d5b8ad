"""tzpush doctor: passes on a healthy stack and fails clearly (with the fix) when the broker is
down, when the broker ignores AMQ_SCHEDULED_DELAY, when Expo refuses the token, when indexes
are missing."""

from __future__ import annotations

import shutil

from pydantic import SecretStr

from devstack.config import ACTIVEMQ_CONF, StackConfig
from devstack.stack import LocalStack
from ops.doctor import check_broker, check_expo, run_checks
from shared.store import db as dbm
from tests.integration.ops_helpers import free_port, run_cli


def _by_name(checks):
    return {c.name: c for c in checks}


def test_healthy_stack_passes(world, capsys):
    dbm.ensure_indexes(world.db)
    assert run_cli(world.settings, "doctor") == 0
    out = capsys.readouterr().out
    assert "all checks passed" in out
    assert "scheduled" in out


def test_missing_indexes_fail_then_fix(world, capsys):
    checks = _by_name(run_checks(world.settings))
    assert checks["indexes"].status == "fail"
    assert "missed_by_time" in checks["indexes"].detail
    assert "--fix-indexes" in checks["indexes"].fix
    assert run_cli(world.settings, "doctor", "--fix-indexes") == 0
    assert dbm.missing_indexes(world.db) == []


def test_broker_down_fails_with_the_fix(world, capsys):
    dbm.ensure_indexes(world.db)
    port = free_port()
    bad = world.settings.model_copy(
        update={"stomp": world.settings.stomp.model_copy(update={"port": port})}
    )
    checks = _by_name(run_checks(bad))
    assert checks["broker"].status == "fail"
    assert f"127.0.0.1:{port}" in checks["broker"].detail
    assert "tzpush services up" in checks["broker"].fix
    assert "scheduled delivery" not in checks
    assert run_cli(bad, "doctor") == 1
    assert "1 check(s) failed: broker" in capsys.readouterr().out


def test_scheduler_support_off_is_detected(world, tmp_path):
    conf = tmp_path / "conf"
    conf.mkdir()
    xml = (ACTIVEMQ_CONF / "activemq.xml").read_text()
    assert 'schedulerSupport="true"' in xml
    (conf / "activemq.xml").write_text(
        xml.replace('schedulerSupport="true"', 'schedulerSupport="false"')
    )
    shutil.copy(ACTIVEMQ_CONF / "log4j.properties", conf / "log4j.properties")
    port = free_port()
    broker = LocalStack(
        StackConfig(state_dir=tmp_path / "state", stomp_port=port, conf_dir=conf),
        die_with_parent=True,
    )
    broker.start("activemq")
    try:
        s = world.settings.model_copy(
            update={"stomp": world.settings.stomp.model_copy(update={"port": port})}
        )
        checks = _by_name(check_broker(s))
        assert checks["broker"].status == "ok"
        probe = checks["scheduled delivery"]
        assert probe.status == "fail"
        assert "schedulerSupport is off" in probe.detail
        assert 'schedulerSupport="true"' in probe.fix
        # The same check on the real broker passes.
        assert _by_name(check_broker(world.settings))["scheduled delivery"].status == "ok"
    finally:
        broker.stop("activemq")


def test_expo_token_rejected_and_accepted(world):
    world.fake.configure(access_token="s3cret")
    (check,) = check_expo(world.settings)
    assert check.status == "fail" and "401" in check.detail
    assert "TZPUSH_EXPO__ACCESS_TOKEN" in check.fix
    good = world.settings.model_copy(
        update={
            "expo": world.settings.expo.model_copy(update={"access_token": SecretStr("s3cret")})
        }
    )
    (check,) = check_expo(good)
    assert check.status == "ok" and "token accepted" in check.detail
    dead = world.settings.model_copy(
        update={
            "expo": world.settings.expo.model_copy(
                update={"base_url": f"http://127.0.0.1:{free_port()}"}
            )
        }
    )
    (check,) = check_expo(dead)
    assert check.status == "fail" and "unreachable" in check.detail
