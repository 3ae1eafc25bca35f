/* RFC 3339 date-times as Kubernetes writes them, read by the rule every preflight SDK holds to (preflight.h,
 * pf_parse_time). */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "preflight.h"

static bool number(const char *text, size_t length, size_t from, size_t digits, int64_t *value) {
    if (from + digits > length) return false;
    *value = 0;
    for (size_t i = from; i < from + digits; i++) {
        if (text[i] < '0' || text[i] > '9') return false;
        *value = *value * 10 + (text[i] - '0');
    }
    return true;
}

static int64_t days_in_month(int64_t year, int64_t month) {
    if (month == 2) return (year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)) ? 29 : 28;
    return (month == 4 || month == 6 || month == 9 || month == 11) ? 30 : 31;
}

/* Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t year, int64_t month, int64_t day) {
    if (month <= 2) year--;
    int64_t era = (year >= 0 ? year : year - 399) / 400;
    int64_t year_of_era = year - era * 400;
    int64_t day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    int64_t day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    return era * 146097 + day_of_era - 719468;
}

bool pf_parse_time(const char *text, int64_t *unix_ms) {
    if (text == NULL) return false;
    size_t length = strlen(text);
    static const struct {
        size_t at;
        char separator;
    } separators[] = {{4, '-'}, {7, '-'}, {10, 'T'}, {13, ':'}, {16, ':'}};
    for (size_t i = 0; i < sizeof separators / sizeof *separators; i++) {
        if (separators[i].at >= length || text[separators[i].at] != separators[i].separator) return false;
    }
    int64_t year, month, day, hour, minute, second;
    if (!number(text, length, 0, 4, &year) || !number(text, length, 5, 2, &month) ||
        !number(text, length, 8, 2, &day) || !number(text, length, 11, 2, &hour) ||
        !number(text, length, 14, 2, &minute) || !number(text, length, 17, 2, &second)) {
        return false;
    }
    if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) || hour > 23 || minute > 59 ||
        second > 59) {
        return false;
    }
    size_t at = 19;
    int64_t millis = 0;
    if (at < length && text[at] == '.') {
        size_t digits = 0;
        while (at + 1 + digits < length && text[at + 1 + digits] >= '0' && text[at + 1 + digits] <= '9') digits++;
        if (digits < 1 || digits > 9) return false;
        size_t kept = digits < 3 ? digits : 3;
        number(text, length, at + 1, kept, &millis);
        for (size_t i = kept; i < 3; i++) millis *= 10;
        at += 1 + digits;
    }
    int64_t offset_minutes = 0;
    if (at + 1 == length && text[at] == 'Z') {
        offset_minutes = 0;
    } else if (at + 6 == length && (text[at] == '+' || text[at] == '-') && text[at + 3] == ':') {
        int64_t hours, minutes;
        if (!number(text, length, at + 1, 2, &hours) || !number(text, length, at + 4, 2, &minutes) || hours > 23 ||
            minutes > 59) {
            return false;
        }
        offset_minutes = (text[at] == '-' ? -1 : 1) * (hours * 60 + minutes);
    } else {
        return false;
    }
    int64_t seconds =
        days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    *unix_ms = seconds * 1000 + millis;
    return true;
}
