//! Just enough calendar arithmetic for `strftime_now`: turn a Unix time into
//! a UTC civil date and format it with the common `strftime` specifiers, so
//! that templates such as Llama 3.2's can print "26 Jul 2024" without a date
//! crate.

/// A UTC calendar date and time of day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CivilDateTime {
    pub year: i64,
    /// 1 = January.
    pub month: u32,
    /// Day of the month, from 1.
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    /// 0 = Sunday, as in C's `tm_wday`.
    pub weekday: u32,
    /// Day of the year, from 1.
    pub day_of_year: u32,
}

const MONTH_NAMES: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

const WEEKDAY_NAMES: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

const SECONDS_PER_DAY: i64 = 86_400;

impl CivilDateTime {
    /// The UTC date and time `unix_seconds` after 1970-01-01T00:00:00Z.
    pub fn from_unix_seconds(unix_seconds: i64) -> Self {
        let days = unix_seconds.div_euclid(SECONDS_PER_DAY);
        let second_of_day = unix_seconds.rem_euclid(SECONDS_PER_DAY) as u32;
        let (year, month, day) = civil_from_days(days);
        Self {
            year,
            month,
            day,
            hour: second_of_day / 3600,
            minute: second_of_day / 60 % 60,
            second: second_of_day % 60,
            // 1970-01-01 was a Thursday.
            weekday: (days + 4).rem_euclid(7) as u32,
            day_of_year: (days - days_from_civil(year, 1, 1) + 1) as u32,
        }
    }

    fn month_name(&self) -> &'static str {
        MONTH_NAMES[(self.month as usize + 11) % 12]
    }

    fn weekday_name(&self) -> &'static str {
        WEEKDAY_NAMES[self.weekday as usize % 7]
    }
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 to (y, m, d) in
/// the proleptic Gregorian calendar. Eras are 400-year cycles starting on a
/// March 1st, which puts the leap day at the end of each year.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Inverse of [`civil_from_days`].
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = year - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let month_from_march = i64::from((month + 9) % 12);
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Formats `date` like C's `strftime` for the specifiers templates use:
/// `%Y %y %m %d %e %j %H %M %S %b %h %B %a %A %%`, plus glibc's `%-d` / `%-m`
/// (no padding). Other specifiers are copied through unchanged, as glibc
/// does, so an exotic format degrades the text instead of failing the render.
pub fn strftime(format: &str, date: &CivilDateTime) -> String {
    let mut out = String::with_capacity(format.len() + 16);
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('-') => match chars.next() {
                Some('d') => out.push_str(&date.day.to_string()),
                Some('m') => out.push_str(&date.month.to_string()),
                Some(other) => {
                    out.push_str("%-");
                    out.push(other);
                }
                None => out.push_str("%-"),
            },
            Some(specifier) => push_specifier(&mut out, specifier, date),
            None => out.push('%'),
        }
    }
    out
}

fn push_specifier(out: &mut String, specifier: char, date: &CivilDateTime) {
    let text = match specifier {
        'Y' => date.year.to_string(),
        'y' => format!("{:02}", date.year.rem_euclid(100)),
        'm' => format!("{:02}", date.month),
        'd' => format!("{:02}", date.day),
        'e' => format!("{:2}", date.day),
        'j' => format!("{:03}", date.day_of_year),
        'H' => format!("{:02}", date.hour),
        'M' => format!("{:02}", date.minute),
        'S' => format!("{:02}", date.second),
        'b' | 'h' => date.month_name()[..3].to_string(),
        'B' => date.month_name().to_string(),
        'a' => date.weekday_name()[..3].to_string(),
        'A' => date.weekday_name().to_string(),
        '%' => "%".to_string(),
        other => format!("%{other}"),
    };
    out.push_str(&text);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2024-07-26T13:05:09Z, a Friday, day 208 of a leap year.
    const LLAMA_DATE: i64 = 1_721_999_109;

    #[test]
    fn unix_time_becomes_civil_date() {
        let date = CivilDateTime::from_unix_seconds(LLAMA_DATE);
        assert_eq!(
            date,
            CivilDateTime {
                year: 2024,
                month: 7,
                day: 26,
                hour: 13,
                minute: 5,
                second: 9,
                weekday: 5,
                day_of_year: 208,
            }
        );
    }

    #[test]
    fn epoch_and_leap_days_are_right() {
        let epoch = CivilDateTime::from_unix_seconds(0);
        assert_eq!(
            (epoch.year, epoch.month, epoch.day, epoch.weekday),
            (1970, 1, 1, 4)
        );
        // 2000-02-29 and 1969-12-31.
        let leap = CivilDateTime::from_unix_seconds(951_782_400);
        assert_eq!(
            (leap.year, leap.month, leap.day, leap.day_of_year),
            (2000, 2, 29, 60)
        );
        let before = CivilDateTime::from_unix_seconds(-1);
        assert_eq!(
            (before.year, before.month, before.day, before.hour),
            (1969, 12, 31, 23)
        );
    }

    #[test]
    fn days_round_trip() {
        for days in [-800_000, -1, 0, 59, 365, 11_016, 19_930, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
    }

    #[test]
    fn strftime_formats_common_specifiers() {
        let date = CivilDateTime::from_unix_seconds(LLAMA_DATE);
        assert_eq!(strftime("%d %b %Y", &date), "26 Jul 2024");
        assert_eq!(strftime("%B %d, %Y", &date), "July 26, 2024");
        assert_eq!(strftime("%Y-%m-%d %H:%M:%S", &date), "2024-07-26 13:05:09");
        assert_eq!(strftime("%a %A %y %j %%", &date), "Fri Friday 24 208 %");
        let early = CivilDateTime::from_unix_seconds(1_704_153_600); // 2024-01-02
        assert_eq!(strftime("%-d/%-m %e|%d", &early), "2/1  2|02");
    }

    #[test]
    fn strftime_keeps_unknown_specifiers() {
        let date = CivilDateTime::from_unix_seconds(0);
        assert_eq!(strftime("%Q %-q 100%", &date), "%Q %-q 100%");
    }
}
