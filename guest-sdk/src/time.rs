//! Times as Kubernetes writes them: an RFC 3339 date-time read into Unix milliseconds, by the same rule in
//! every SDK (so that a check answers the same in every language).

/// Parses an RFC 3339 date-time as Kubernetes writes them (`2026-12-04T10:15:30Z`,
/// `2026-12-04T11:15:30.25+01:00`) into Unix milliseconds. The rule every SDK holds to: `YYYY-MM-DDTHH:MM:SS`,
/// then 1 to 9 fraction digits after a `.` (truncated to milliseconds), then `Z` or an offset `±HH:MM`; `T`
/// and `Z` upper case; the date must exist (no February 30th), seconds 0–59, offsets up to ±23:59.
pub fn parse_time(text: &str) -> Result<i64, String> {
    parse(text.as_bytes())
        .ok_or_else(|| format!("{text:?} is not an RFC 3339 time such as 2026-12-04T10:15:30Z"))
}

fn parse(text: &[u8]) -> Option<i64> {
    let number = |from: usize, digits: usize| -> Option<i64> {
        let field = text.get(from..from + digits)?;
        field.iter().try_fold(0i64, |value, byte| {
            byte.is_ascii_digit()
                .then(|| value * 10 + i64::from(byte - b'0'))
        })
    };
    let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if separators
        .iter()
        .any(|(at, separator)| text.get(*at) != Some(separator))
    {
        return None;
    }
    let (year, month, day) = (number(0, 4)?, number(5, 2)?, number(8, 2)?);
    let (hour, minute, second) = (number(11, 2)?, number(14, 2)?, number(17, 2)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let mut at = 19;
    let mut millis = 0;
    if text.get(at) == Some(&b'.') {
        let digits = text[at + 1..]
            .iter()
            .take_while(|byte| byte.is_ascii_digit())
            .count();
        if !(1..=9).contains(&digits) {
            return None;
        }
        let kept = digits.min(3);
        millis = number(at + 1, kept)? * 10i64.pow(3 - kept as u32);
        at += 1 + digits;
    }
    let offset_minutes = match text.get(at)? {
        b'Z' if text.len() == at + 1 => 0,
        sign @ (b'+' | b'-') if text.len() == at + 6 && text[at + 3] == b':' => {
            let (hours, minutes) = (number(at + 1, 2)?, number(at + 4, 2)?);
            if hours > 23 || minutes > 59 {
                return None;
            }
            let magnitude = hours * 60 + minutes;
            if *sign == b'-' { -magnitude } else { magnitude }
        }
        _ => return None,
    };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second
        - offset_minutes * 60;
    Some(seconds * 1_000 + millis)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the given date of the proleptic Gregorian calendar (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_kubernetes_writes_and_refuses_the_rest() {
        for (text, expected) in [
            ("1970-01-01T00:00:00Z", Some(0)),
            ("2026-12-04T10:15:30Z", Some(1_796_379_330_000)),
            ("2026-12-04T10:15:30.2509Z", Some(1_796_379_330_250)),
            ("2026-12-04T11:15:30.25+01:00", Some(1_796_379_330_250)),
            (
                "2026-12-04T04:45:30.123456789-05:30",
                Some(1_796_379_330_123),
            ),
            ("2024-02-29T00:00:00Z", Some(1_709_164_800_000)),
            ("1969-12-31T23:59:59.5Z", Some(-500)),
            ("0099-01-01T00:00:00Z", Some(-59_042_995_200_000)),
            ("2026-02-29T00:00:00Z", None),
            ("2026-02-30T00:00:00Z", None),
            ("2026-12-04 10:15:30Z", None),
            ("2026-12-04t10:15:30z", None),
            ("2026-12-04T10:15:30", None),
            ("2026-12-04T10:15:30.Z", None),
            ("2026-12-04T10:15:30.1234567891Z", None),
            ("2026-12-04T24:00:00Z", None),
            ("2026-12-04T10:15:60Z", None),
            ("2026-12-04T10:15:30+24:00", None),
            ("2026-12-04T10:15:30,5Z", None),
            ("2026-12-04T10:15:30Z ", None),
            ("2026-12-04", None),
            ("", None),
        ] {
            assert_eq!(parse_time(text).ok(), expected, "{text:?}");
        }
    }
}
