"""Times as the pages show them: how long ago ("3 min ago"), with the exact time on hover.

The server writes each label when it renders a page, so a page reads right without script;
/static/times.js rewrites the labels as the page stays open, by the same rule (`ago`), which the
Chromium tests hold the two to.
"""

from __future__ import annotations

from datetime import UTC, datetime

from markupsafe import Markup, escape

MINUTE, HOUR, DAY = 60, 3600, 86400
# Past this, a date says more than a count of days.
DAYS_COUNTED = 30


def moment(time: str | datetime | None) -> datetime | None:
    """`time` (an ISO 8601 text, as commits and records carry it) as an aware datetime; None if it is none."""
    if isinstance(time, datetime):
        found = time
    else:
        try:
            found = datetime.fromisoformat(time or "")
        except ValueError:
            return None
    return found if found.tzinfo else found.replace(tzinfo=UTC)


def ago(then: datetime, now: datetime) -> str:
    """How long before `now` `then` was: "just now" within a minute either way, then whole minutes,
    hours and days ("in ..." for a writer's clock ahead of this one), and past 30 days its date (UTC)."""
    seconds = (now - then).total_seconds()
    size = abs(seconds)
    if size < MINUTE:
        return "just now"
    if size < HOUR:
        amount = f"{int(size // MINUTE)} min"
    elif size < DAY:
        amount = f"{int(size // HOUR)} h"
    elif size < DAYS_COUNTED * DAY:
        days = int(size // DAY)
        amount = "1 day" if days == 1 else f"{days} days"
    else:
        return then.astimezone(UTC).date().isoformat()
    return f"in {amount}" if seconds < 0 else f"{amount} ago"


def exact(then: datetime) -> str:
    """The time to the second, in UTC, as the hover shows it."""
    return then.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def time_element(time: str | datetime | None, now: datetime) -> Markup:
    """A <time> saying how long ago `time` was, the exact time its title; the text as given if it is no time."""
    then = moment(time)
    if then is None:
        return escape(time or "")
    stamp = then.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return Markup('<time class="ago" datetime="{}" title="{}">{}</time>').format(stamp, exact(then), ago(then, now))
