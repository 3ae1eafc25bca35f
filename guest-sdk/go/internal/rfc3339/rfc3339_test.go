package rfc3339

import "testing"

func TestUnixMillisReadsWhatKubernetesWritesAndRefusesTheRest(t *testing.T) {
	for text, expected := range map[string]int64{
		"1970-01-01T00:00:00Z":                0,
		"2026-12-04T10:15:30Z":                1796379330000,
		"2026-12-04T10:15:30.2509Z":           1796379330250,
		"2026-12-04T11:15:30.25+01:00":        1796379330250,
		"2026-12-04T04:45:30.123456789-05:30": 1796379330123,
		"2024-02-29T00:00:00Z":                1709164800000,
		"1969-12-31T23:59:59.5Z":              -500,
		"0099-01-01T00:00:00Z":                -59042995200000,
	} {
		if got, ok := UnixMillis(text); !ok || got != expected {
			t.Errorf("%q: got %d, %v; want %d", text, got, ok, expected)
		}
	}
	for _, text := range []string{"2026-02-29T00:00:00Z", "2026-02-30T00:00:00Z", "2026-12-04 10:15:30Z",
		"2026-12-04t10:15:30z", "2026-12-04T10:15:30", "2026-12-04T10:15:30.Z", "2026-12-04T10:15:30.1234567891Z",
		"2026-12-04T24:00:00Z", "2026-12-04T10:15:60Z", "2026-12-04T10:15:30+24:00", "2026-12-04T10:15:30,5Z",
		"2026-12-04T10:15:30Z ", "2026-12-04", ""} {
		if _, ok := UnixMillis(text); ok {
			t.Errorf("%q was accepted", text)
		}
	}
}
