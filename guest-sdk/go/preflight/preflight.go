// Package preflight writes a preflight check in Go: a function from a Request to an Outcome.
//
//	package main
//
//	import "github.com/preflight-wasm/preflight/guest-sdk/go/preflight"
//
//	func check(request preflight.Request) preflight.Outcome {
//		var object struct {
//			Spec struct {
//				Paused bool `json:"paused"`
//			} `json:"spec"`
//		}
//		if err := request.DecodeObject(&object); err != nil {
//			return preflight.InvalidObject(err)
//		}
//		if object.Spec.Paused {
//			return preflight.RequeueAfter(10*time.Minute).Because("Paused", "paused; checking again in 10 minutes")
//		}
//		return preflight.Proceed()
//	}
//
//	func init() { preflight.Handle(check, nil) }
//
//	func main() {}
//
// The idioms are the Rust SDK's: proceed / requeue after / block / error, with a reason and a message,
// outputs, logging. The object and the configuration are JSON, decoded into the check's own types with
// encoding/json. A configuration that is not a JSON object is an error with reason InvalidConfig; a panic in
// the check traps, which the host reports as a trap and backs off. Build with Go's wasip1 port as a reactor
// and the reactor adapter (guest-sdk/go/README.md).
package preflight

// The contract's bindings (package bindings), regenerated when the contract changes; scripts/test checks they
// are current.
//go:generate wit-bindgen go ../../wit --world preflight:guest/check --out-dir ../bindings --pkg-name github.com/preflight-wasm/preflight/guest-sdk/go/bindings

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"time"

	// The contract's exports: linked into every check that imports this package.
	_ "github.com/preflight-wasm/preflight/guest-sdk/go/bindings/wit_exports"

	"github.com/preflight-wasm/preflight/guest-sdk/go/bindings/preflight_check_log"
	types "github.com/preflight-wasm/preflight/guest-sdk/go/bindings/preflight_check_types"
	"github.com/preflight-wasm/preflight/guest-sdk/go/internal/registry"
	witTypes "go.bytecodealliance.org/pkg/wit/types"
)

// Target says which object is being checked.
type Target struct {
	Group, Version, Kind string
	// Namespace is empty for cluster-scoped objects.
	Namespace string
	Name      string
}

// Request is what a check is given: the object and its configuration as JSON, the object's identity and
// the host's clock when the evaluation started. Nothing is decoded until the check asks: DecodeObject and
// DecodeConfig into the check's types, Object and Config into generic values.
type Request struct {
	// RawObject is the object as the host sent it (the parts the check declared it reads, or all of it).
	RawObject string
	// RawConfig is the check's configuration as JSON; empty when none was given.
	RawConfig string
	Target    Target
	Now       time.Time
}

// DecodeObject decodes the object into `into` (a pointer to the check's type for it); the error says what
// does not match, for InvalidObject.
func (request Request) DecodeObject(into any) error {
	if err := json.Unmarshal([]byte(request.RawObject), into); err != nil {
		return fmt.Errorf("the object does not match the check's type: %w", err)
	}
	return nil
}

// Object decodes the object into generic values (maps, slices, strings, float64s, bools, nil). Decoding
// into the check's own type with DecodeObject is cheaper and says what does not match.
func (request Request) Object() (map[string]any, error) {
	object := map[string]any{}
	err := request.DecodeObject(&object)
	return object, err
}

// Config decodes the configuration into generic values; an empty map when none was given.
func (request Request) Config() (map[string]any, error) {
	return parseConfig(request.RawConfig)
}

// DecodeConfig decodes the configuration into `into`; fields absent from the configuration keep the values
// `into` already holds, so set defaults first.
func (request Request) DecodeConfig(into any) error {
	return decodeConfig(request.RawConfig, into)
}

// Outcome is the decision of a check; build it with Proceed, RequeueAfter, Block or Error.
type Outcome struct {
	proceed  bool
	delay    *time.Duration
	err      *string
	reason   string
	message  string
	outputs  []types.Output
	overflow bool
}

// Proceed: the object may be reconciled now.
func Proceed() Outcome { return Outcome{proceed: true} }

// RequeueAfter: do not reconcile now; evaluate again after `delay`.
func RequeueAfter(delay time.Duration) Outcome { return Outcome{delay: &delay} }

// Block: do not reconcile; evaluate again when the object or the check changes.
func Block() Outcome { return Outcome{} }

// Error: the check could not decide; the host backs off and retries.
func Error(err error) Outcome {
	message := err.Error()
	return Outcome{err: &message}
}

// Errorf is Error with a formatted message.
func Errorf(format string, arguments ...any) Outcome { return Error(fmt.Errorf(format, arguments...)) }

// InvalidObject: the object does not have the shape the check needs; an error with reason InvalidObject.
func InvalidObject(err error) Outcome { return Error(err).Because("InvalidObject", "") }

// Because sets the condition's reason (UpperCamelCase) and message.
func (outcome Outcome) Because(reason, message string) Outcome {
	outcome.reason, outcome.message = reason, message
	return outcome
}

// RecheckAfter, for a proceeding outcome: evaluate again after `delay` even if nothing changes.
func (outcome Outcome) RecheckAfter(delay time.Duration) Outcome {
	outcome.delay = &delay
	return outcome
}

// Output records key = value on the object (by default in its preflight.dev/outputs annotation); a key
// given twice keeps the last value.
func (outcome Outcome) Output(key, value string) Outcome {
	outputs := make([]types.Output, 0, len(outcome.outputs)+1)
	for _, output := range outcome.outputs {
		if output.Key != key {
			outputs = append(outputs, output)
		}
	}
	outcome.outputs = append(outputs, types.Output{Key: key, Value: value})
	return outcome
}

func (outcome Outcome) result() types.PreflightResult {
	result := types.PreflightResult{
		Proceed:        outcome.proceed,
		RequeueAfterMs: witTypes.None[uint32](),
		Error:          witTypes.None[string](),
		Reason:         outcome.reason,
		Message:        outcome.message,
		Outputs:        outcome.outputs,
	}
	if outcome.delay != nil {
		milliseconds := math.Ceil(float64(*outcome.delay) / float64(time.Millisecond))
		result.RequeueAfterMs = witTypes.Some(uint32(math.Min(math.Max(milliseconds, 0), math.MaxUint32)))
	}
	if outcome.err != nil {
		result.Error = witTypes.Some(*outcome.err)
	}
	return result
}

// WithJitter is `base` plus up to `percent`% of it, chosen by a hash of the object's namespace and name
// (FNV-1a, the same rule as every SDK's with_jitter): objects spread their retries, each keeps its schedule.
func WithJitter(base time.Duration, percent uint32, target Target) time.Duration {
	spread := uint64(base.Milliseconds()) * uint64(min(percent, 100)) / 100
	if spread == 0 {
		return base
	}
	hash := fnv.New64a()
	hash.Write([]byte(target.Namespace + "/" + target.Name))
	return base + time.Duration(hash.Sum64()%spread)*time.Millisecond
}

func logAt(level preflight_check_log.Level) func(string, ...any) {
	return func(format string, arguments ...any) {
		preflight_check_log.Log(level, fmt.Sprintf(format, arguments...))
	}
}

// Log lines, tagged by the host with the check and the object.
var (
	Trace = logAt(preflight_check_log.LevelTrace)
	Debug = logAt(preflight_check_log.LevelDebug)
	Info  = logAt(preflight_check_log.LevelInfo)
	Warn  = logAt(preflight_check_log.LevelWarn)
	Log   = logAt(preflight_check_log.LevelError)
)

// Handle makes `check` the check this component exports, and `validate` (nil: none) its configuration
// check, called when the configuration is loaded: an error refuses the configuration with its message.
// Call it from an init function.
func Handle(check func(Request) Outcome, validate func(config map[string]any) error) {
	registry.Evaluate = func(raw types.CheckRequest) types.PreflightResult {
		defer collectIfGrown()
		return evaluate(check, raw).result()
	}
	registry.Validate = func(raw string) string {
		defer collectIfGrown()
		config, err := parseConfig(raw)
		if err == nil && validate != nil {
			err = validate(config)
		}
		if err != nil {
			return err.Error()
		}
		return ""
	}
}

func evaluate(check func(Request) Outcome, raw types.CheckRequest) Outcome {
	if !isMapping(raw.Config, true) {
		return Errorf("invalid check configuration: the configuration must be a mapping").Because("InvalidConfig", "")
	}
	if !isMapping(raw.Object, false) {
		return InvalidObject(errors.New("the object is not a JSON object"))
	}
	request := Request{
		RawObject: raw.Object,
		RawConfig: raw.Config,
		Target: Target{
			Group:     raw.Target.Group,
			Version:   raw.Target.Version,
			Kind:      raw.Target.Kind,
			Namespace: raw.Target.Namespace.SomeOr(""),
			Name:      raw.Target.Name,
		},
		Now: time.Unix(int64(raw.Now.Seconds), int64(raw.Now.Nanoseconds)).UTC(),
	}
	return check(request)
}

// parseConfig decodes a configuration: empty is {}, anything but a JSON object is refused.
func parseConfig(raw string) (map[string]any, error) {
	config := map[string]any{}
	return config, decodeConfig(raw, &config)
}

func decodeConfig(raw string, into any) error {
	trimmed := strings.TrimSpace(raw)
	if !isMapping(trimmed, true) {
		return errors.New("the configuration must be a mapping")
	}
	if trimmed == "" {
		return nil
	}
	return json.Unmarshal([]byte(trimmed), into)
}

// isMapping says whether `raw` is shaped like a JSON object (or is empty, when `emptyIsMapping`): the shape
// every evaluation checks before the check runs, without decoding; the check's decode finds what is malformed
// inside.
func isMapping(raw string, emptyIsMapping bool) bool {
	trimmed := strings.TrimSpace(raw)
	if trimmed == "" {
		return emptyIsMapping
	}
	return trimmed[0] == '{'
}
