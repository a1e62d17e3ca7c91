//! Cron schedules: parsing and the pure "what fires when" rules of cron triggers.
//!
//! This module is shared by every backend and never reads the clock: every function takes the
//! times it needs as arguments, so it is tested with explicit times.
//!
//! # Syntax (docs/api.md, triggers: `schedule`, `timezone`)
//!
//! - a 5-field cron expression `minute hour day-of-month month day-of-week`, in the syntax of
//!   the `croner` crate (Vixie cron: `*`, `,`, `-`, `*/n`, `a-b/n`, month and weekday names,
//!   plus croner's `L`, `W`, `#` and `+` extensions). Day-of-month and day-of-week are OR-ed,
//!   as in Vixie cron. Seconds and year fields (6 or 7 fields) are rejected.
//! - the macros `@hourly`, `@daily`, `@midnight`, `@weekly`, `@monthly`, `@yearly`,
//!   `@annually` (as in Vixie cron; `@weekly` is Sunday 00:00).
//! - `@every <duration>`: a fixed interval, written as a sequence of `<integer><unit>` with units
//!   `d`, `h`, `m`, `s` and `ms` (`30s`, `5m`, `1h30m`, `2d`). It must be a whole number of
//!   seconds, at least `1s` and at most `366d`.
//!
//! `timezone` is an IANA name (`UTC`, `Europe/Berlin`). Cron times are wall-clock times in that
//! zone; `@every` ticks are absolute (the zone is validated but does not change them).
//!
//! # Ticks and firing (docs/architecture.md, "Triggers and jobs": "Cron fires once per schedule tick, never twice after a
//! restart and never catches up a backlog of missed ticks (at most the latest one)")
//!
//! - The *anchor* is when the schedule took effect: the trigger's creation or its last spec
//!   change. Only ticks strictly after the anchor count.
//! - `@every d` ticks are `anchor + k·d` for `k ≥ 1` (computed arithmetically).
//! - [`Schedule::due`] returns the latest tick in `(max(anchor, last_fired), now]`, or nothing:
//!   a restart after many missed ticks fires once (the latest), a restart just after a fired
//!   tick fires nothing.
//! - [`Schedule::next_fire`] is the first tick after `max(anchor, last_fired, now)`.
//!
//! # Daylight-saving time (cron expressions only)
//!
//! The rules are croner's, which follow Vixie cron / cronie and the Open Cron Pattern
//! Specification. croner distinguishes *fixed-time* expressions (a single value, no `*` and no
//! step, in the minute and hour fields, e.g. `30 2 * * *`, `@daily`) from *interval*
//! expressions (anything else, e.g. `*/15 * * * *`, `0 * * * *`, `@hourly`, `0 1-3 * * *`):
//!
//! - **Spring forward** (a wall-clock range is skipped, e.g. Europe/Berlin 2026-03-29,
//!   02:00 → 03:00): a fixed-time tick inside the gap fires once, at the first instant after the
//!   gap (`30 2 * * *` fires at 03:00 CEST = 01:00 UTC that day), as Vixie cron runs jobs of the
//!   skipped hour right after the change. Interval ticks inside the gap do not exist and are
//!   skipped (`@hourly` fires 23 times that day).
//! - **Fall back** (a wall-clock range happens twice, e.g. Europe/Berlin 2026-10-25,
//!   03:00 → 02:00): a fixed-time tick fires once, at its first (summer-time) occurrence
//!   (`30 2 * * *` fires at 02:30 CEST = 00:30 UTC, not again at 02:30 CET). Interval ticks fire
//!   on both passes, in real-time order (`@hourly` fires 25 times that day, `*/30 * * * *` at
//!   02:00 and 02:30 CEST and again at 02:00 and 02:30 CET).

use std::str::FromStr;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use crate::{Error, Result};

/// The smallest `@every` interval, in seconds.
const MIN_EVERY_SECS: i64 = 1;
/// The largest `@every` interval, in seconds (366 days).
const MAX_EVERY_SECS: i64 = 366 * 24 * 60 * 60;

/// A parsed schedule in a time zone: a cron expression (wall-clock times in the zone) or a fixed
/// `@every` interval. See the [module documentation](self) for the syntax and the DST rules.
#[derive(Clone, Debug)]
pub struct Schedule {
    kind: Kind,
    tz: Tz,
}

/// The two kinds of schedule.
#[derive(Clone, Debug)]
enum Kind {
    /// A 5-field cron expression (macros are expanded to one).
    Cron(Box<Cron>),
    /// `@every <n>s`: ticks every `n` seconds after the anchor.
    Every(TimeDelta),
}

impl Schedule {
    /// Parses `schedule` (5-field cron "m h dom mon dow"; the macros `@hourly` `@daily`
    /// `@midnight` `@weekly` `@monthly` `@yearly` `@annually`; or `@every <duration>` with a
    /// duration such as `30s`, `5m`, `1h`, `1h30m` — a whole number of seconds, minimum `1s`,
    /// maximum `366d`) in the IANA time zone `timezone` (e.g. `UTC`, `Europe/Berlin`).
    ///
    /// Errors: [`Error::InvalidField`] with field `schedule` or `timezone` and a message saying
    /// what is wrong (e.g. a 6-field cron expression with seconds gets "expected 5 fields …",
    /// `0 0 30 2 *` gets "never fires"). The syntax is docs/api.md (triggers).
    pub fn parse(schedule: &str, timezone: &str) -> Result<Schedule> {
        let tz = parse_timezone(timezone)?;
        let text = schedule.trim();
        if text.is_empty() {
            return Err(schedule_error(
                "must not be empty; use a 5-field cron expression such as \"0 1 * * *\", \
                 a macro such as \"@daily\", or \"@every 30s\"",
            ));
        }
        let kind = if let Some(rest) = text.strip_prefix('@') {
            parse_macro(rest)?
        } else {
            Kind::Cron(Box::new(parse_cron(text, text)?))
        };
        if let Kind::Cron(cron) = &kind {
            ensure_fires(cron, tz, schedule)?;
        }
        Ok(Schedule { kind, tz })
    }

    /// The interval of an `@every` schedule; `None` for a cron expression or macro.
    pub fn every(&self) -> Option<TimeDelta> {
        match self.kind {
            Kind::Every(every) => Some(every),
            Kind::Cron(_) => None,
        }
    }

    /// The first tick strictly after `after`.
    ///
    /// For a cron expression this is the next matching wall-clock time in the zone (with the DST
    /// rules of the module documentation). An `@every d` schedule has no anchor here, so `after`
    /// is taken as its phase (the anchor or a previous tick) and the answer is `after + d`; use
    /// [`Schedule::next_fire`] to count from the real anchor. `None` only if the answer is out of
    /// range (never for a parsed schedule and a realistic `after`).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.kind {
            Kind::Cron(cron) => {
                cron.find_next_occurrence(&after.with_timezone(&self.tz), false).ok().map(|t| t.with_timezone(&Utc))
            }
            Kind::Every(every) => after.checked_add_signed(*every),
        }
    }

    /// The tick to fire now, if any: the LATEST tick `t` with `since < t <= now`, where
    /// `since = max(anchor, last_fired)`. At most one tick is returned however many were missed
    /// (a restart after three missed ticks fires once, the latest; a restart just after a fired
    /// tick fires nothing) — docs/architecture.md, "Triggers and jobs".
    ///
    /// `anchor`: when the schedule took effect (the trigger's creation or last spec change);
    /// `@every d` ticks are `anchor + k·d` (`k ≥ 1`, computed arithmetically); cron ticks are
    /// wall-clock times in the zone, found by one backward search from `now`. Either way the
    /// cost does not depend on how long the server was down.
    pub fn due(
        &self,
        anchor: DateTime<Utc>,
        last_fired: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let since = last_fired.map_or(anchor, |last| last.max(anchor));
        if now <= since {
            return None;
        }
        let latest = match &self.kind {
            Kind::Cron(cron) => {
                cron.find_previous_occurrence(&now.with_timezone(&self.tz), true).ok().map(|t| t.with_timezone(&Utc))?
            }
            Kind::Every(every) => {
                let k = every_ticks_until(anchor, *every, now)?;
                if k < 1 {
                    return None;
                }
                every_tick(anchor, *every, k)?
            }
        };
        (latest > since && latest <= now).then_some(latest)
    }

    /// The next tick after `max(anchor, last_fired, now)` — for the status field `next_fire` and
    /// for sleeping until it. Ticks are as in [`Schedule::due`]: `@every d` ticks are
    /// `anchor + k·d` (`k ≥ 1`), cron ticks are wall-clock times in the zone.
    pub fn next_fire(
        &self,
        anchor: DateTime<Utc>,
        last_fired: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let base = last_fired.map_or(anchor, |last| last.max(anchor)).max(now);
        match &self.kind {
            Kind::Cron(_) => self.next_after(base),
            Kind::Every(every) => {
                // The number of ticks at or before `base` (0 when `base` is the anchor), plus one.
                let k = every_ticks_until(anchor, *every, base)?.checked_add(1)?;
                every_tick(anchor, *every, k.max(1))
            }
        }
    }
}

/// Checks a schedule and time zone (for API validation): `Schedule::parse(..).map(|_| ())`.
/// Same rules and errors as [`Schedule::parse`].
pub fn check(schedule: &str, timezone: &str) -> Result<()> {
    Schedule::parse(schedule, timezone).map(|_| ())
}

/// `floor((at - anchor) / every)`, the number of `@every` ticks in `(anchor, at]`, or `None` if
/// `at` is before the anchor.
fn every_ticks_until(anchor: DateTime<Utc>, every: TimeDelta, at: DateTime<Utc>) -> Option<i64> {
    let elapsed = at.signed_duration_since(anchor);
    if elapsed < TimeDelta::zero() {
        return None;
    }
    // `every` is a whole number of seconds, so flooring `elapsed` to milliseconds first does not
    // change the quotient.
    let every_ms = every.num_milliseconds();
    if every_ms <= 0 {
        return None;
    }
    Some(elapsed.num_milliseconds() / every_ms)
}

/// `anchor + k·every`, or `None` on overflow.
fn every_tick(anchor: DateTime<Utc>, every: TimeDelta, k: i64) -> Option<DateTime<Utc>> {
    let offset = TimeDelta::try_milliseconds(every.num_milliseconds().checked_mul(k)?)?;
    anchor.checked_add_signed(offset)
}

/// An [`Error::InvalidField`] for the field `schedule`.
fn schedule_error(message: impl Into<String>) -> Error {
    Error::field("schedule", message)
}

/// Parses an IANA time-zone name.
fn parse_timezone(timezone: &str) -> Result<Tz> {
    let name = timezone.trim();
    if name.is_empty() {
        return Err(Error::field("timezone", "must be an IANA time zone name such as \"UTC\" or \"Europe/Berlin\""));
    }
    Tz::from_str(name).map_err(|_| {
        Error::field(
            "timezone",
            format!("unknown time zone {name:?}; use an IANA name such as \"UTC\" or \"Europe/Berlin\""),
        )
    })
}

/// Parses what follows the `@` of a macro or of `@every`.
fn parse_macro(rest: &str) -> Result<Kind> {
    let (word, arg) = match rest.split_once(char::is_whitespace) {
        Some((word, arg)) => (word, arg.trim()),
        None => (rest, ""),
    };
    let word = word.to_ascii_lowercase();
    if word == "every" {
        return parse_every(arg).map(Kind::Every);
    }
    let expansion = match word.as_str() {
        "hourly" => "0 * * * *",
        "daily" | "midnight" => "0 0 * * *",
        "weekly" => "0 0 * * 0",
        "monthly" => "0 0 1 * *",
        "yearly" | "annually" => "0 0 1 1 *",
        "reboot" => {
            return Err(schedule_error("@reboot is not supported by cron triggers"));
        }
        _ => {
            return Err(schedule_error(format!(
                "unknown macro \"@{word}\"; use @hourly, @daily, @midnight, @weekly, @monthly, \
                 @yearly, @annually or \"@every <duration>\""
            )));
        }
    };
    if !arg.is_empty() {
        return Err(schedule_error(format!("@{word} takes no argument, got {arg:?}")));
    }
    Ok(Kind::Cron(Box::new(parse_cron(expansion, &format!("@{word}"))?)))
}

/// Parses the duration of `@every`: `<integer><unit>` repeated, units `d`, `h`, `m`, `s`, `ms`.
fn parse_every(text: &str) -> Result<TimeDelta> {
    const UNITS: &str = "use units d, h, m, s (e.g. 30s, 5m, 1h30m)";
    if text.is_empty() {
        return Err(schedule_error(format!("@every needs a duration; {UNITS}")));
    }
    let bad = |why: &str| schedule_error(format!("invalid @every duration {text:?}: {why}"));
    let mut total_ms: u128 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad(&format!("expected a whole number before the unit; {UNITS}")));
        }
        let (number, after) = rest.split_at(digits);
        let unit_len = after.find(|c: char| c.is_ascii_digit()).unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let unit_ms: u128 = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "" => return Err(bad(&format!("{number:?} has no unit; {UNITS}"))),
            other => return Err(bad(&format!("unknown unit {other:?}; {UNITS}"))),
        };
        // More than 20 digits cannot be a valid duration; this also keeps the parse in range.
        let value: u128 = if number.len() > 20 {
            u128::MAX
        } else {
            number.parse().map_err(|_| bad("the number is out of range"))?
        };
        total_ms = total_ms.saturating_add(value.saturating_mul(unit_ms));
        rest = next;
    }
    if total_ms < (MIN_EVERY_SECS as u128) * 1_000 {
        return Err(bad("the minimum is 1s"));
    }
    if total_ms > (MAX_EVERY_SECS as u128) * 1_000 {
        return Err(bad("the maximum is 366d"));
    }
    if !total_ms.is_multiple_of(1_000) {
        return Err(bad("must be a whole number of seconds"));
    }
    // In range per the checks above, so the conversion cannot fail.
    let secs = i64::try_from(total_ms / 1_000).map_err(|_| bad("the maximum is 366d"))?;
    TimeDelta::try_seconds(secs).ok_or_else(|| bad("the maximum is 366d"))
}

/// Parses a 5-field cron expression with croner (seconds and year fields disallowed).
/// `shown` is how the user wrote it, for messages.
fn parse_cron(expression: &str, shown: &str) -> Result<Cron> {
    let fields = expression.split_whitespace().count();
    if fields != 5 {
        let hint = if fields > 5 { "; seconds and year fields are not supported" } else { "" };
        return Err(schedule_error(format!(
            "expected 5 fields (minute hour day-of-month month day-of-week) in {shown:?}, \
             got {fields}{hint}"
        )));
    }
    let parse =
        |text: &str| CronParser::builder().seconds(Seconds::Disallowed).year(Year::Disallowed).build().parse(text);
    parse(expression).map_err(|e| {
        // croner's message names neither the field nor its range: find the field at fault by
        // parsing each alone (the others `*`).
        let parts: Vec<&str> = expression.split_whitespace().collect();
        let at_fault = FIELDS.iter().enumerate().find(|(i, _)| {
            let mut alone = ["*"; 5];
            alone[*i] = parts[*i];
            parse(&alone.join(" ")).is_err()
        });
        match at_fault {
            Some((i, (name, range))) => schedule_error(format!(
                "invalid cron expression {shown:?}: the {name} field {:?} is out of its range {range} or malformed ({e})",
                parts[i]
            )),
            None => schedule_error(format!("invalid cron expression {shown:?}: {e}")),
        }
    })
}

/// The five fields of a cron expression, in order, with the values each takes.
const FIELDS: [(&str, &str); 5] = [
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day-of-month", "1-31"),
    ("month", "1-12 or JAN-DEC"),
    ("day-of-week", "0-7 or SUN-SAT"),
];

/// Rejects a cron expression that never matches (e.g. `0 0 30 2 *`). A 5-field expression
/// repeats every 400 years at most, and croner searches up to the year 5000, so a search from a
/// fixed reference instant decides it without reading the clock.
fn ensure_fires(cron: &Cron, tz: Tz, shown: &str) -> Result<()> {
    let reference = Utc
        .with_ymd_and_hms(2000, 1, 1, 0, 0, 0)
        .single()
        .ok_or_else(|| Error::Internal("schedule reference time".into()))?;
    cron.find_next_occurrence(&reference.with_timezone(&tz), false).map(|_| ()).map_err(|_| {
        schedule_error(format!("{:?} never fires (no date matches its day and month fields)", shown.trim()))
    })
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).single().expect("valid UTC time")
    }

    #[test]
    fn regression_a_bad_cron_field_is_named_with_its_range() {
        for (expression, field, range) in [
            ("61 * * * *", "minute", "0-59"),
            ("0 24 * * *", "hour", "0-23"),
            ("0 0 32 * *", "day-of-month", "1-31"),
            ("0 0 1 13 *", "month", "1-12"),
            ("0 0 * * 9", "day-of-week", "0-7"),
        ] {
            let err = Schedule::parse(expression, "UTC").expect_err(expression).to_string();
            assert!(err.contains(&format!("the {field} field")) && err.contains(range), "{expression}: {err}");
        }
    }

    fn parse(schedule: &str, tz: &str) -> Schedule {
        Schedule::parse(schedule, tz).expect("schedule parses")
    }

    /// All ticks in `(from, to]`, by repeated forward search.
    fn ticks(s: &Schedule, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        let mut out = Vec::new();
        let mut t = from;
        while let Some(next) = s.next_after(t) {
            if next > to {
                break;
            }
            out.push(next);
            t = next;
        }
        out
    }

    fn err_field(schedule: &str, tz: &str) -> (String, String) {
        match Schedule::parse(schedule, tz) {
            Err(Error::InvalidField { field, message }) => (field, message),
            other => panic!("{schedule:?} in {tz:?}: expected InvalidField, got {other:?}"),
        }
    }

    #[test]
    fn daily_at_one_fires_once_the_next_day() {
        let s = parse("0 1 * * *", "UTC");
        let anchor = utc(2026, 1, 10, 12, 25, 0);
        let tick = utc(2026, 1, 11, 1, 0, 0);
        assert_eq!(s.next_fire(anchor, None, anchor), Some(tick));
        assert_eq!(s.due(anchor, None, anchor), None);
        assert_eq!(s.due(anchor, None, utc(2026, 1, 11, 0, 59, 59)), None);
        assert_eq!(s.due(anchor, None, tick), Some(tick));
        assert_eq!(s.due(anchor, Some(tick), utc(2026, 1, 11, 1, 0, 30)), None);
        assert_eq!(s.next_fire(anchor, Some(tick), utc(2026, 1, 11, 1, 0, 30)), Some(utc(2026, 1, 12, 1, 0, 0)));
    }

    #[test]
    fn sub_second_times_are_handled() {
        let s = parse("0 1 * * *", "UTC");
        let anchor = utc(2026, 1, 10, 12, 25, 0);
        let tick = utc(2026, 1, 11, 1, 0, 0);
        let ms = TimeDelta::milliseconds(1);
        assert_eq!(s.due(anchor, None, tick - ms), None);
        assert_eq!(s.due(anchor, None, tick + ms), Some(tick));
        assert_eq!(s.next_after(tick - ms), Some(tick));
        assert_eq!(s.next_after(tick), Some(utc(2026, 1, 12, 1, 0, 0)));
    }

    #[test]
    fn a_tick_at_the_anchor_does_not_count() {
        let s = parse("0 1 * * *", "UTC");
        let anchor = utc(2026, 1, 11, 1, 0, 0);
        assert_eq!(s.due(anchor, None, utc(2026, 1, 11, 1, 0, 10)), None);
        assert_eq!(s.next_fire(anchor, None, anchor), Some(utc(2026, 1, 12, 1, 0, 0)));
    }

    #[test]
    fn berlin_wall_clock_is_cet_in_winter_and_cest_in_summer() {
        let s = parse("0 9 * * *", "Europe/Berlin");
        // Winter: CET = UTC+1.
        let anchor = utc(2026, 1, 15, 0, 0, 0);
        assert_eq!(s.next_fire(anchor, None, anchor), Some(utc(2026, 1, 15, 8, 0, 0)));
        // Summer: CEST = UTC+2.
        let anchor = utc(2026, 7, 1, 0, 0, 0);
        assert_eq!(s.next_fire(anchor, None, anchor), Some(utc(2026, 7, 1, 7, 0, 0)));
        assert_eq!(s.due(anchor, None, utc(2026, 7, 1, 7, 0, 1)), Some(utc(2026, 7, 1, 7, 0, 0)));
    }

    #[test]
    fn berlin_spring_forward_runs_the_skipped_fixed_time_once_after_the_gap() {
        // 2026-03-29 02:00 CET -> 03:00 CEST (01:00 UTC). 02:30 does not exist that day.
        let s = parse("30 2 * * *", "Europe/Berlin");
        let anchor = utc(2026, 3, 28, 12, 0, 0);
        let gap_run = utc(2026, 3, 29, 1, 0, 0); // 03:00 CEST
        assert_eq!(s.next_fire(anchor, None, anchor), Some(gap_run));
        assert_eq!(s.due(anchor, None, utc(2026, 3, 29, 0, 59, 59)), None);
        assert_eq!(s.due(anchor, None, gap_run), Some(gap_run));
        assert_eq!(s.due(anchor, None, utc(2026, 3, 29, 5, 0, 0)), Some(gap_run));
        assert_eq!(s.due(anchor, Some(gap_run), utc(2026, 3, 29, 23, 0, 0)), None);
        // The next day is back to 02:30 CEST = 00:30 UTC.
        assert_eq!(s.next_fire(anchor, Some(gap_run), gap_run), Some(utc(2026, 3, 30, 0, 30, 0)));
        // Exactly once on the day of the change.
        let day = ticks(&s, utc(2026, 3, 28, 23, 0, 0), utc(2026, 3, 29, 22, 0, 0));
        assert_eq!(day, vec![gap_run]);
        // And the day before, at 02:30 CET = 01:30 UTC.
        assert_eq!(s.next_after(utc(2026, 3, 28, 0, 0, 0)), Some(utc(2026, 3, 28, 1, 30, 0)));
    }

    #[test]
    fn berlin_fall_back_runs_a_fixed_time_once() {
        // 2026-10-25 03:00 CEST -> 02:00 CET (01:00 UTC). 02:30 happens twice:
        // 00:30 UTC (CEST) and 01:30 UTC (CET).
        let s = parse("30 2 * * *", "Europe/Berlin");
        let anchor = utc(2026, 10, 24, 12, 0, 0);
        let first = utc(2026, 10, 25, 0, 30, 0);
        let day = ticks(&s, utc(2026, 10, 24, 22, 0, 0), utc(2026, 10, 25, 22, 0, 0));
        assert_eq!(day, vec![first]);
        assert_eq!(s.next_fire(anchor, None, anchor), Some(first));
        assert_eq!(s.due(anchor, None, first), Some(first));
        // At the second 02:30 (CET) nothing more is due.
        assert_eq!(s.due(anchor, Some(first), utc(2026, 10, 25, 1, 30, 0)), None);
        assert_eq!(s.due(anchor, Some(first), utc(2026, 10, 25, 1, 45, 0)), None);
        assert_eq!(
            s.next_fire(anchor, Some(first), utc(2026, 10, 25, 1, 30, 0)),
            Some(utc(2026, 10, 26, 1, 30, 0)) // 02:30 CET
        );
        // A server down across both 02:30s fires the one tick.
        assert_eq!(s.due(anchor, None, utc(2026, 10, 25, 3, 0, 0)), Some(first));
    }

    #[test]
    fn interval_expressions_skip_the_gap_and_repeat_the_overlap() {
        let hourly = parse("@hourly", "Europe/Berlin");
        // Local days: 2026-03-29 is 23 hours long, 2026-10-25 is 25 hours long.
        let spring = ticks(&hourly, utc(2026, 3, 28, 22, 59, 59), utc(2026, 3, 29, 21, 59, 59));
        assert_eq!(spring.len(), 23);
        let fall = ticks(&hourly, utc(2026, 10, 24, 21, 59, 59), utc(2026, 10, 25, 22, 59, 59));
        assert_eq!(fall.len(), 25);

        let half = parse("*/30 * * * *", "Europe/Berlin");
        // 02:00 and 02:30 CEST (00:00, 00:30 UTC), then 02:00 and 02:30 CET (01:00, 01:30 UTC).
        assert_eq!(
            ticks(&half, utc(2026, 10, 24, 23, 59, 59), utc(2026, 10, 25, 1, 59, 59)),
            vec![
                utc(2026, 10, 25, 0, 0, 0),
                utc(2026, 10, 25, 0, 30, 0),
                utc(2026, 10, 25, 1, 0, 0),
                utc(2026, 10, 25, 1, 30, 0),
            ]
        );
        let anchor = utc(2026, 10, 24, 0, 0, 0);
        assert_eq!(
            half.due(anchor, Some(utc(2026, 10, 25, 0, 30, 0)), utc(2026, 10, 25, 1, 10, 0)),
            Some(utc(2026, 10, 25, 1, 0, 0))
        );
    }

    #[test]
    fn restart_just_after_a_tick_does_not_fire_it_again() {
        let s = parse("*/5 * * * *", "UTC");
        let anchor = utc(2026, 5, 1, 9, 0, 0);
        let tick = utc(2026, 5, 1, 10, 5, 0);
        assert_eq!(s.due(anchor, Some(tick), utc(2026, 5, 1, 10, 5, 20)), None);
        assert_eq!(s.next_fire(anchor, Some(tick), utc(2026, 5, 1, 10, 5, 20)), Some(utc(2026, 5, 1, 10, 10, 0)));
    }

    #[test]
    fn restart_after_three_missed_ticks_fires_once_the_latest() {
        let s = parse("*/5 * * * *", "UTC");
        let anchor = utc(2026, 5, 1, 9, 0, 0);
        let last = utc(2026, 5, 1, 10, 0, 0);
        let now = utc(2026, 5, 1, 10, 17, 0); // missed 10:05, 10:10, 10:15
        let fired = s.due(anchor, Some(last), now);
        assert_eq!(fired, Some(utc(2026, 5, 1, 10, 15, 0)));
        assert_eq!(s.due(anchor, fired, now), None);
        assert_eq!(s.next_fire(anchor, fired, now), Some(utc(2026, 5, 1, 10, 20, 0)));
    }

    #[test]
    fn every_30s_counts_from_the_anchor() {
        let s = parse("@every 30s", "UTC");
        let t = utc(2026, 2, 1, 12, 0, 7) + TimeDelta::milliseconds(250);
        let secs = TimeDelta::seconds;
        assert_eq!(s.due(t, None, t + secs(29)), None);
        assert_eq!(s.due(t, None, t + secs(30)), Some(t + secs(30)));
        assert_eq!(s.due(t, Some(t + secs(30)), t + secs(95)), Some(t + secs(90)));
        assert_eq!(s.due(t, Some(t + secs(90)), t + secs(95)), None);
        assert_eq!(s.next_fire(t, None, t), Some(t + secs(30)));
        assert_eq!(s.next_fire(t, Some(t + secs(90)), t + secs(95)), Some(t + secs(120)));
        assert_eq!(s.next_fire(t, None, t + secs(30)), Some(t + secs(60)));
        assert_eq!(s.next_after(t + secs(90)), Some(t + secs(120)));
        // Before the anchor (clock skew): nothing due, first tick still anchor + d.
        assert_eq!(s.due(t, None, t - secs(5)), None);
        assert_eq!(s.next_fire(t, None, t - secs(5)), Some(t + secs(30)));
    }

    #[test]
    fn every_after_ten_days_down_returns_the_latest_tick_quickly() {
        let s = parse("@every 30s", "UTC");
        let t = utc(2026, 2, 1, 12, 0, 0);
        let secs = TimeDelta::seconds;
        let now = t + TimeDelta::days(10) + secs(7);
        let started = Instant::now();
        assert_eq!(s.due(t, Some(t + secs(30)), now), Some(t + TimeDelta::days(10)));
        let one_sec = parse("@every 1s", "UTC");
        let later = t + TimeDelta::days(3650) + TimeDelta::milliseconds(500);
        assert_eq!(one_sec.due(t, Some(t + secs(1)), later), Some(t + TimeDelta::days(3650)));
        assert_eq!(one_sec.next_fire(t, None, later), Some(t + TimeDelta::days(3650) + secs(1)));
        assert!(started.elapsed().as_millis() < 100, "took {:?}", started.elapsed());
    }

    #[test]
    fn cron_after_a_long_downtime_is_quick() {
        let s = parse("* * * * *", "Europe/Berlin");
        let anchor = utc(2024, 1, 1, 0, 0, 0);
        let now = utc(2026, 6, 1, 12, 34, 56);
        let started = Instant::now();
        assert_eq!(s.due(anchor, None, now), Some(utc(2026, 6, 1, 12, 34, 0)));
        let yearly = parse("@yearly", "Europe/Berlin");
        // 2026-01-01 00:00 CET = 2025-12-31 23:00 UTC.
        assert_eq!(yearly.due(anchor, None, now), Some(utc(2025, 12, 31, 23, 0, 0)));
        assert!(started.elapsed().as_millis() < 1000, "took {:?}", started.elapsed());
    }

    #[test]
    fn due_agrees_with_forward_iteration_across_dst_changes() {
        let patterns = [
            "30 2 * * *",
            "0 2 * * *",
            "0 3 * * *",
            "0 * * * *",
            "*/15 * * * *",
            "15,45 1-3 * * *",
            "30 1 * * 0",
            "0 0 * * *",
        ];
        let zones = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"];
        // Windows around the 2026 changes of these zones.
        let windows = [
            (utc(2026, 3, 7, 12, 0, 0), utc(2026, 3, 9, 12, 0, 0)),
            (utc(2026, 3, 28, 12, 0, 0), utc(2026, 3, 30, 12, 0, 0)),
            (utc(2026, 4, 4, 0, 0, 0), utc(2026, 4, 6, 0, 0, 0)),
            (utc(2026, 10, 3, 0, 0, 0), utc(2026, 10, 5, 0, 0, 0)),
            (utc(2026, 10, 24, 12, 0, 0), utc(2026, 10, 26, 12, 0, 0)),
            (utc(2026, 10, 31, 12, 0, 0), utc(2026, 11, 2, 12, 0, 0)),
        ];
        for pattern in patterns {
            for zone in zones {
                let s = parse(pattern, zone);
                for (from, to) in windows {
                    let all = ticks(&s, from, to + TimeDelta::days(8));
                    // Around every tick, and a coarse sweep in between.
                    let one = TimeDelta::seconds(1);
                    let mut probes: Vec<_> =
                        all.iter().filter(|t| **t < to).flat_map(|t| [*t - one, *t, *t + one]).collect();
                    let mut sweep = from;
                    while sweep < to {
                        probes.push(sweep);
                        sweep += TimeDelta::seconds(41 * 60 + 13);
                    }
                    for now in probes {
                        let latest = all.iter().copied().rfind(|t| *t <= now);
                        let next = all.iter().copied().find(|t| *t > now);
                        assert_eq!(s.due(from, None, now), latest, "{pattern} {zone} due at {now}");
                        assert_eq!(s.next_fire(from, None, now), next, "{pattern} {zone} next at {now}");
                        if let Some(t) = latest {
                            assert_eq!(s.due(from, Some(t), now), None, "{pattern} {zone} {now}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn macros_parse_and_mean_what_vixie_cron_means() {
        let at = utc(2026, 5, 13, 10, 20, 0); // a Wednesday
        let next = |s: &str| parse(s, "UTC").next_after(at);
        assert_eq!(next("@hourly"), Some(utc(2026, 5, 13, 11, 0, 0)));
        assert_eq!(next("@daily"), Some(utc(2026, 5, 14, 0, 0, 0)));
        assert_eq!(next("@midnight"), Some(utc(2026, 5, 14, 0, 0, 0)));
        assert_eq!(next("@weekly"), Some(utc(2026, 5, 17, 0, 0, 0))); // Sunday
        assert_eq!(next("@monthly"), Some(utc(2026, 6, 1, 0, 0, 0)));
        assert_eq!(next("@yearly"), Some(utc(2027, 1, 1, 0, 0, 0)));
        assert_eq!(next("@annually"), Some(utc(2027, 1, 1, 0, 0, 0)));
        assert_eq!(next("@DAILY"), Some(utc(2026, 5, 14, 0, 0, 0)));
        assert_eq!(next("@every 1h30m"), Some(at + TimeDelta::minutes(90)));
        assert_eq!(next("@every 5m"), Some(at + TimeDelta::minutes(5)));
        assert_eq!(next("@every 2d"), Some(at + TimeDelta::days(2)));
        assert_eq!(next("@every 1500ms500ms"), Some(at + TimeDelta::seconds(2)));
        assert_eq!(next("0 12 * * mon-fri"), Some(utc(2026, 5, 13, 12, 0, 0)));
        assert!(check("@every 366d", "UTC").is_ok());
        assert!(check("  0 1 * * *  ", "Europe/Berlin").is_ok());
    }

    #[test]
    fn invalid_schedules_and_zones_name_the_field() {
        let cases = [
            ("@every 0s", "UTC", "schedule", "minimum is 1s"),
            ("@every 500ms", "UTC", "schedule", "minimum is 1s"),
            ("@every 1500ms", "UTC", "schedule", "whole number of seconds"),
            ("@every 367d", "UTC", "schedule", "maximum is 366d"),
            ("@every 10x", "UTC", "schedule", "unknown unit"),
            ("@every 10", "UTC", "schedule", "no unit"),
            ("@every", "UTC", "schedule", "needs a duration"),
            ("@every 1.5h", "UTC", "schedule", "unknown unit"),
            ("@every 99999999999999999999999h", "UTC", "schedule", "maximum is 366d"),
            ("* * * *", "UTC", "schedule", "expected 5 fields"),
            ("0 0 * * * *", "UTC", "schedule", "expected 5 fields"),
            ("61 * * * *", "UTC", "schedule", "invalid cron expression"),
            ("0 0 30 2 *", "UTC", "schedule", "never fires"),
            ("@reboot", "UTC", "schedule", "not supported"),
            ("@fortnightly", "UTC", "schedule", "unknown macro"),
            ("@daily 5", "UTC", "schedule", "no argument"),
            ("", "UTC", "schedule", "must not be empty"),
            ("0 1 * * *", "Mars/Olympus", "timezone", "unknown time zone"),
            ("0 1 * * *", "", "timezone", "IANA"),
        ];
        for (schedule, tz, field, needle) in cases {
            let (got_field, message) = err_field(schedule, tz);
            assert_eq!(got_field, field, "{schedule:?} in {tz:?}: {message}");
            assert!(message.contains(needle), "{schedule:?} in {tz:?}: {message}");
        }
        let (_, six) = err_field("0 0 * * * *", "UTC");
        assert!(six.contains("seconds"), "{six}");
        assert!(check("0 0 * * * *", "UTC").is_err());
    }
}
