"""``/v1/users/{userId}`` (PUT, GET, DELETE = erasure) and its devices (PUT = login, DELETE =
logout, GET = the user's active registrations)."""

from __future__ import annotations

from fastapi import Request, Response

from api import pages
from api.deps import AppCaller, BackendDep
from api.models import DeviceIn, DeviceOut, DevicePage, UserIn, UserOut
from api.params import DeviceId, PageDep, UserId
from api.router import ResourceRouter
from api.views import device_out, user_out
from shared.store.mongo import reads

router = ResourceRouter(prefix="/v1/users", tags=["users"])


@router.write("/{userId}", UserOut, "Create or replace a user")  # 404: the user erased meanwhile
def put_user(user_id: UserId, body: UserIn, b: BackendDep, _: AppCaller) -> UserOut:
    """The user as a whole: a category left out is on, no quietHours/dailyCap clears them. A
    new time zone re-plans every pending message at once (as `tzpush users upsert`)."""
    quiet = (body.quiet_hours.start, body.quiet_hours.end) if body.quiet_hours else None
    doc = b.manager.upsert_user(
        user_id,
        timezone=body.timezone,
        enabled=body.enabled,
        categories={c: body.categories.get(c, True) for c in b.settings.categories},
        quiet_hours=quiet,
        daily_cap=body.daily_cap,
    )
    return user_out(doc, b.settings.categories)


@router.read("/{userId}", UserOut, "A user")
def get_user(user_id: UserId, b: BackendDep, _: AppCaller) -> UserOut:
    return user_out(b.manager.get_user(user_id), b.settings.categories)


@router.remove("/{userId}", "Erase a user")
def delete_user(user_id: UserId, b: BackendDep, _: AppCaller) -> Response:
    """Erasure: pending (and missed) messages cancelled, devices deactivated and removed,
    reminders and the user removed; message history kept anonymised (docs/api.md)."""
    b.manager.erase_user(user_id)
    return Response(status_code=204)


@router.write(
    "/{userId}/devices/{deviceId}",
    DeviceOut,
    "A login: this device's push token now belongs to this user",
)
async def put_device(
    user_id: UserId, device_id: DeviceId, body: DeviceIn, b: BackendDep, _: AppCaller
) -> DeviceOut:
    """One active registration per device and per token string: a device (or token) another
    user held is taken from them, and their pending messages for it are cancelled."""
    doc = await b.login(user_id, device_id, body.token)
    return device_out(doc)


@router.remove(
    "/{userId}/devices/{deviceId}",
    "A logout: this user's registration of the device is deactivated",
)
def delete_device(user_id: UserId, device_id: DeviceId, b: BackendDep, _: AppCaller) -> Response:
    """Deactivates only this user's registration, so a late logout never logs out whoever
    holds the device now. Logging out twice is fine."""
    b.manager.logout(user_id, device_id)
    return Response(status_code=204)


@router.read(
    "/{userId}/devices", DevicePage, "The user's active device registrations, a page at a time"
)
def list_devices(
    user_id: UserId, b: BackendDep, _: AppCaller, request: Request, page: PageDep
) -> DevicePage:
    """By registration id; ``next`` links the next page."""
    key = pages.decode(page.after, "devices", (str,))
    b.manager.get_user(user_id)
    after = None if key is None else key[0]
    docs = reads.active_registrations(b.db, user_id, after, page.limit + 1)
    more = len(docs) > page.limit
    docs = docs[: page.limit]
    cursor = pages.encode("devices", [str(docs[-1]["_id"])]) if more else None
    link = pages.next_link(request, {"limit": page.limit}, cursor)
    return DevicePage(items=[device_out(d) for d in docs], next=link)
