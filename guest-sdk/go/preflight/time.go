package preflight

import (
	"fmt"

	"github.com/preflight-wasm/preflight/guest-sdk/go/internal/rfc3339"
)

// ParseTime reads an RFC 3339 date-time as Kubernetes writes them ("2026-12-04T10:15:30Z",
// "2026-12-04T11:15:30.25+01:00") into Unix milliseconds, by the rule every SDK holds to: YYYY-MM-DDTHH:MM:SS,
// then 1 to 9 fraction digits after a "." (truncated to milliseconds), then "Z" or "+HH:MM"/"-HH:MM"; "T" and
// "Z" upper case; the date must exist, seconds 0-59, offsets up to 23:59. (time.Parse accepts a comma before
// the fraction, which other SDKs refuse.)
func ParseTime(text string) (int64, error) {
	if unixMillis, ok := rfc3339.UnixMillis(text); ok {
		return unixMillis, nil
	}
	return 0, fmt.Errorf("%q is not an RFC 3339 time such as 2026-12-04T10:15:30Z", text)
}
