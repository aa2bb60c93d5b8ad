"""An oracle of management and planning, written without the product's code: users, device
registrations and reminders as plain values, each management call applied to them by the rules
docs/api.md states, and the occurrences every active reminder should have pending.

What it states exactly, and so what the state machine (``test_management_machine.py``) checks:
- a user is created only with a zone; a new zone moves every reminder not removed to a new
  version; a category left out is on;
- a login is the one active registration of its device id and of its token string: every
  other active registration holding either is turned off; the same login again changes
  nothing; a logout turns off only that user's registration of the device;
- a reminder id is global (another user's, removed or not, is a 409); a PUT of the same
  content changes nothing; any other change, a removal, a pause or a resume is a new version;
- an erasure removes the user, their registrations and reminders (their ids are free again);
- planning: a pass plans ``[max(plannedUntil or now, now - 2 days), now + horizon)`` once at
  least a slice of it is unplanned; a change plans ``[now, plannedUntil)`` at once; nothing is
  planned before the first pass.

Occurrences are computed with zoneinfo on dates where none of ``ZONES`` changes its offset
(``START`` and the clock's reach are chosen so; ``assert_no_transitions`` guards it): the DST
rules for gaps and overlaps are the subject of ``test_localtime_properties.py``, not of this.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

UTC = dt.UTC
START = dt.datetime(2031, 1, 13, 6, 0, tzinfo=UTC)  # a Monday; far from every DST change below
REACH = dt.timedelta(days=20)  # the clock never runs further than this from START
MAX_CATCH_UP = dt.timedelta(days=2)
# Half-hour and 45-minute offsets, both sides of the date line; none changes its offset in
# January (the southern ones are on summer time then, until April).
ZONES = (
    "UTC",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "America/New_York",
    "America/St_Johns",
    "Australia/Sydney",
    "Pacific/Chatham",
    "Pacific/Kiritimati",
)

Key = tuple[str, int, str, str, str, str, dt.datetime]
"""A pending occurrence: (reminder, version, user, device, token, local date, instant)."""


def assert_no_transitions(zones: Iterable[str], start: dt.datetime, end: dt.datetime) -> None:
    """Fail unless each zone keeps one UTC offset over ``[start, end]`` (hourly samples; tz data
    has no two changes less than 95 hours apart)."""
    for name in zones:
        zone = zoneinfo.ZoneInfo(name)
        seen = {
            (start + dt.timedelta(hours=h)).astimezone(zone).utcoffset()
            for h in range(int((end - start).total_seconds() // 3600) + 1)
        }
        assert len(seen) == 1, f"{name} changes its offset between {start} and {end}: {seen}"


def occurrences(
    at: str,
    offset: int,
    weekdays: tuple[int, ...] | None,
    zone: str,
    start: dt.datetime,
    end: dt.datetime,
) -> list[tuple[dt.date, dt.datetime]]:
    """(local date, instant) of each send with ``start <= instant < end``: the wall time on
    each local date (of the weekdays, if any) in the zone, plus ``offset`` minutes."""
    tz = zoneinfo.ZoneInfo(zone)
    hh, mm = (int(x) for x in at.split(":"))
    out = []
    day = (start - dt.timedelta(days=3)).date()
    while day <= (end + dt.timedelta(days=3)).date():
        if weekdays is None or day.weekday() in weekdays:
            local = dt.datetime(day.year, day.month, day.day, hh, mm, tzinfo=tz)
            instant = local.astimezone(UTC) + dt.timedelta(minutes=offset)
            if start <= instant < end:
                out.append((day, instant))
        day += dt.timedelta(days=1)
    return out


@dataclass(frozen=True)
class Content:
    """What a reminder says (what a PUT compares)."""

    category: str
    label: str
    at: str
    offset: int = 0
    weekdays: tuple[int, ...] | None = None
    active: bool = True

    @classmethod
    def of(cls, stored: Mapping[str, Any]) -> Content:
        """A stored reminder document's content."""
        days = stored.get("weekdays")
        return cls(
            stored["category"],
            stored["label"],
            stored["time"],
            stored.get("offsetMinutes") or 0,
            None if days is None else tuple(days),
            bool(stored.get("active", True)),
        )


@dataclass
class User:
    zone: str
    enabled: bool = True
    off: set[str] = field(default_factory=set)

    def accepts(self, category: str) -> bool:
        return self.enabled and category not in self.off


@dataclass
class Reminder:
    user: str
    content: Content
    version: int = 1
    deleted: bool = False

    @property
    def live(self) -> bool:
        return self.content.active and not self.deleted


@dataclass
class Registration:
    user: str
    device: str
    token: str
    active: bool = True


# Outcomes as the model predicts them: a reminder's "created" / "changed" / "unchanged", "ok"
# for any other success, or the refusal's HTTP status.
OK, CREATED, CHANGED, UNCHANGED = "ok", "created", "changed", "unchanged"
NOT_FOUND, CONFLICT, INVALID = "404", "409", "422"


@dataclass
class Model:
    """The state management should have left, and how far planning has reached."""

    users: dict[str, User] = field(default_factory=dict)
    reminders: dict[str, Reminder] = field(default_factory=dict)
    registrations: list[Registration] = field(default_factory=list)
    planned_until: dt.datetime | None = None
    erased: set[str] = field(default_factory=set)  # erased and not created again
    # (reminder, version, user, device, token) a planning may have planned at some point: the
    # version current while the registration was active. Whatever is pending and no longer
    # sendable (a registration off, a category off) must be one of these.
    seen: set[tuple[str, int, str, str, str]] = field(default_factory=set)

    def note(self) -> None:
        """Record what may be planned now (after each call, and each item of a batch)."""
        for rid, r in self.reminders.items():
            for g in self.registrations:
                if g.active and g.user == r.user:
                    self.seen.add((rid, r.version, r.user, g.device, g.token))

    # -- users ---------------------------------------------------------------------------------
    def change_user(
        self,
        uid: str,
        zone: str | None,
        enabled: bool | None = None,
        categories: dict[str, bool] | None = None,
    ) -> str:
        user = self.users.get(uid)
        if user is None:
            if zone is None:
                return INVALID
            user = self.users[uid] = User(zone)
            self.erased.discard(uid)
        elif zone is not None and zone != user.zone:
            user.zone = zone
            for r in self.reminders.values():
                if r.user == uid and not r.deleted:
                    r.version += 1
        if enabled is not None:
            user.enabled = enabled
        for cat, on in (categories or {}).items():
            (user.off.discard if on else user.off.add)(cat)
        return OK

    def erase(self, uid: str) -> str:
        if uid not in self.users:
            return NOT_FOUND
        del self.users[uid]
        self.erased.add(uid)
        self.registrations = [g for g in self.registrations if g.user != uid]
        self.reminders = {rid: r for rid, r in self.reminders.items() if r.user != uid}
        return OK

    # -- registrations -------------------------------------------------------------------------
    def login(self, uid: str, device: str, token: str) -> str:
        if uid not in self.users:
            return NOT_FOUND
        same = False
        for g in self.registrations:
            if not g.active or (g.device != device and g.token != token):
                continue
            if (g.user, g.device, g.token) == (uid, device, token):
                same = True
            else:
                g.active = False
        if not same:
            self.registrations.append(Registration(uid, device, token))
        return OK

    def logout(self, uid: str, device: str) -> str:
        if uid not in self.users:
            return NOT_FOUND
        for g in self.registrations:
            if g.active and g.user == uid and g.device == device:
                g.active = False
        return OK

    def unregister(self, *, device: str | None = None, token: str | None = None) -> str:
        for g in self.registrations:
            if g.active and (g.device == device or g.token == token):
                g.active = False
        return OK

    def active(self) -> Counter[tuple[str, str, str]]:
        return Counter((g.user, g.device, g.token) for g in self.registrations if g.active)

    # -- reminders -----------------------------------------------------------------------------
    def put(self, uid: str, rid: str, content: Content) -> str:
        if uid not in self.users:
            return NOT_FOUND
        r = self.reminders.get(rid)
        if r is None:
            self.reminders[rid] = Reminder(uid, content)
            return CREATED
        if r.user != uid:
            return CONFLICT
        if not r.deleted and r.content == content:
            return UNCHANGED
        revived = r.deleted
        r.content, r.deleted, r.version = content, False, r.version + 1
        return CREATED if revived else CHANGED

    def patch(self, uid: str, rid: str, **changes: object) -> str:
        """The API's PATCH: the stored content with these fields changed, through ``put``."""
        r = self.reminders.get(rid)
        if uid not in self.users or r is None or r.user != uid or r.deleted:
            return NOT_FOUND
        return self.put(uid, rid, replace(r.content, **changes))  # type: ignore[arg-type]

    def update(self, rid: str, **changes: object) -> str:
        """The CLI's change: always a new version, even of a removed reminder (not revived)."""
        r = self.reminders.get(rid)
        if r is None:
            return NOT_FOUND
        r.content = replace(r.content, **changes)  # type: ignore[arg-type]
        r.version += 1
        return OK

    def remove(self, rid: str) -> str:
        r = self.reminders.get(rid)
        if r is None:
            return NOT_FOUND
        r.content = replace(r.content, active=False)
        r.deleted = True
        r.version += 1
        return OK

    # -- planning ------------------------------------------------------------------------------
    def pass_window(
        self, now: dt.datetime, horizon: dt.timedelta, slice_: dt.timedelta
    ) -> tuple[dt.datetime, dt.datetime] | None:
        """The window a pass at ``now`` plans, or None when less than a slice is unplanned."""
        start = max(self.planned_until or now, now - MAX_CATCH_UP)
        end = now + horizon
        return (start, end) if end - start >= slice_ else None

    def expected(self, now: dt.datetime) -> Counter[Key]:
        """Every occurrence that must be pending and sendable, due in ``[now, plannedUntil)``:
        of the current version of each active reminder whose user accepts its category, once
        for each of the user's active registrations."""
        out: Counter[Key] = Counter()
        if self.planned_until is None or self.planned_until <= now:
            return out
        for rid, r in self.reminders.items():
            user = self.users[r.user]
            if not r.live or not user.accepts(r.content.category):
                continue
            c = r.content
            occs = occurrences(c.at, c.offset, c.weekdays, user.zone, now, self.planned_until)
            for g in self.registrations:
                if g.active and g.user == r.user:
                    for day, at in occs:
                        key = (rid, r.version, r.user, g.device, g.token, day.isoformat(), at)
                        out[key] += 1
        return out
