"""One settings object for every tzpush process.

Read only in entry points (`Settings.load()`), then passed down. Environment variables use the
prefix ``TZPUSH_`` and ``__`` between nested groups, e.g. ``TZPUSH_MONGO__URI``,
``TZPUSH_STOMP__PORT``, ``TZPUSH_EXPO__RATE_PER_SECOND``. A ``.env`` file in the working
directory is read too (environment variables win). Defaults point at the local stack that
``tzpush services up`` and ``tzpush fake-expo`` start.

One module per family of groups: ``services`` (MongoDB, the broker, Expo), ``roles`` (creator,
consumer, API: each read by its own role only), ``common`` (what several roles read: wake-ups,
outcomes, shutdown, categories, metrics, local files), ``load`` (``Settings`` and its errors).
Every name is importable from ``shared.settings`` itself.
"""

from __future__ import annotations

from shared.settings.base import Group, is_loopback, within
from shared.settings.common import (
    DEFAULT_CATEGORIES,
    CategorySettings,
    LocalSettings,
    MetricsSettings,
    OutcomeSettings,
    ShutdownSettings,
    WakeupSettings,
    default_categories,
)
from shared.settings.load import (
    LOG_LEVELS,
    MOVED,
    Settings,
    SettingsError,
    format_validation_error,
)
from shared.settings.roles import ApiKey, ApiSettings, ConsumerSettings, CreatorSettings
from shared.settings.services import ExpoSettings, MongoSettings, StompSettings

__all__ = [
    "DEFAULT_CATEGORIES",
    "LOG_LEVELS",
    "MOVED",
    "ApiKey",
    "ApiSettings",
    "CategorySettings",
    "ConsumerSettings",
    "CreatorSettings",
    "ExpoSettings",
    "Group",
    "LocalSettings",
    "MetricsSettings",
    "MongoSettings",
    "OutcomeSettings",
    "Settings",
    "SettingsError",
    "ShutdownSettings",
    "StompSettings",
    "WakeupSettings",
    "default_categories",
    "format_validation_error",
    "is_loopback",
    "within",
]
