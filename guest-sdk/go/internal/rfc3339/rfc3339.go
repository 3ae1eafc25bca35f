// Package rfc3339 reads RFC 3339 date-times by the rule every preflight SDK holds to (see preflight.ParseTime);
// apart from the SDK so that it is tested natively (the SDK's bindings link only for wasip1).
package rfc3339

// UnixMillis reads text by the rule preflight.ParseTime documents; ok is false when text breaks it.
func UnixMillis(text string) (unixMillis int64, ok bool) {
	number := func(from, digits int) (int64, bool) {
		if from+digits > len(text) {
			return 0, false
		}
		var value int64
		for _, c := range []byte(text[from : from+digits]) {
			if c < '0' || c > '9' {
				return 0, false
			}
			value = value*10 + int64(c-'0')
		}
		return value, true
	}
	for at, separator := range map[int]byte{4: '-', 7: '-', 10: 'T', 13: ':', 16: ':'} {
		if at >= len(text) || text[at] != separator {
			return 0, false
		}
	}
	var fields [6]int64
	for i, at := range [6]int{0, 5, 8, 11, 14, 17} {
		digits := 2
		if i == 0 {
			digits = 4
		}
		value, ok := number(at, digits)
		if !ok {
			return 0, false
		}
		fields[i] = value
	}
	year, month, day, hour, minute, second := fields[0], fields[1], fields[2], fields[3], fields[4], fields[5]
	if month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month) || hour > 23 || minute > 59 || second > 59 {
		return 0, false
	}
	at, millis := 19, int64(0)
	if at < len(text) && text[at] == '.' {
		digits := 0
		for at+1+digits < len(text) && text[at+1+digits] >= '0' && text[at+1+digits] <= '9' {
			digits++
		}
		if digits < 1 || digits > 9 {
			return 0, false
		}
		kept := min(digits, 3)
		value, _ := number(at+1, kept)
		for range 3 - kept {
			value *= 10
		}
		millis = value
		at += 1 + digits
	}
	var offsetMinutes int64
	switch rest := text[min(at, len(text)):]; {
	case rest == "Z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		hours, okHours := number(at+1, 2)
		minutes, okMinutes := number(at+4, 2)
		if !okHours || !okMinutes || hours > 23 || minutes > 59 {
			return 0, false
		}
		offsetMinutes = hours*60 + minutes
		if rest[0] == '-' {
			offsetMinutes = -offsetMinutes
		}
	default:
		return 0, false
	}
	seconds := daysFromCivil(year, month, day)*86400 + hour*3600 + minute*60 + second - offsetMinutes*60
	return seconds*1000 + millis, true
}

func daysInMonth(year, month int64) int64 {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil is the days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
// days_from_civil); years here are 0-9999.
func daysFromCivil(year, month, day int64) int64 {
	if month <= 2 {
		year--
	}
	era := year / 400
	if year < 0 {
		era = (year - 399) / 400
	}
	yearOfEra := year - era*400
	dayOfYear := (153*((month+9)%12)+2)/5 + day - 1
	dayOfEra := yearOfEra*365 + yearOfEra/4 - yearOfEra/100 + dayOfYear
	return era*146097 + dayOfEra - 719468
}
