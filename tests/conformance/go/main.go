// Command conformance is the conformance check in Go (see tests/conformance/README.md): what it does is
// picked by the object's spec.behave.
package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/preflight-wasm/preflight/guest-sdk/go/preflight"
)

type object struct {
	Spec struct {
		Behave  *string `json:"behave"`
		Seconds uint32  `json:"seconds"`
		At      string  `json:"at"`
	} `json:"spec"`
}

type config struct {
	Greeting string `json:"greeting"`
}

// startedAt is read by the runtime's start, which a pre-initialised build runs once, at build time, and keeps:
// its snapshot must still be the same bytes from one build to the next (host/cli/tests/all/languages.rs).
var startedAt = time.Now()

// calls counts the evaluations this instance has served: 1 in a fresh instance, more when the host
// reuses instances.
var calls int

func check(request preflight.Request) preflight.Outcome {
	calls++
	var probe object
	if err := request.DecodeObject(&probe); err != nil {
		return preflight.InvalidObject(err)
	}
	if probe.Spec.Behave == nil {
		return preflight.InvalidObject(fmt.Errorf("the object does not match the check's type: spec.behave is missing"))
	}
	var settings config
	if err := request.DecodeConfig(&settings); err != nil {
		return preflight.Errorf("invalid check configuration: %v", err).Because("InvalidConfig", "")
	}
	switch behave := *probe.Spec.Behave; behave {
	case "proceed":
		// The generic reads, Object() and Config(), must see what the typed decodes saw.
		generic, err := request.Object()
		if err != nil || generic["spec"].(map[string]any)["behave"] != behave {
			return preflight.Errorf("Object() read %v (%v)", generic, err)
		}
		genericConfig, err := request.Config()
		if err != nil || genericConfig["greeting"] != settings.Greeting {
			return preflight.Errorf("Config() read %v (%v)", genericConfig, err)
		}
		return preflight.Proceed().Because("Ready", "ready").
			Output("namespace", request.Target.Namespace).
			Output("greeting", settings.Greeting).
			Output("now", strconv.FormatInt(request.Now.UnixMilli(), 10))
	case "requeue":
		return preflight.RequeueAfter(time.Duration(probe.Spec.Seconds)*time.Second).
			Because("Waiting", fmt.Sprintf("waiting %d s", probe.Spec.Seconds))
	case "since":
		at, err := preflight.ParseTime(probe.Spec.At)
		if err != nil {
			return preflight.InvalidObject(fmt.Errorf("the object does not match the check's type: spec.at: %w", err))
		}
		return preflight.Proceed().Because("Parsed", "").Output("at", strconv.FormatInt(at, 10))
	case "count":
		return preflight.Proceed().Because("Counted", "").Output("calls", strconv.Itoa(calls))
	case "block":
		return preflight.Block().Because("Blocked", "blocked")
	case "error":
		return preflight.Errorf("it failed").Because("Failed", "")
	case "bad-reason":
		return preflight.Proceed().Because("not camel case", "")
	case "trap":
		panic("conformance: a trap, as asked")
	case "loop":
		for {
		}
	default:
		return preflight.Errorf("unknown behaviour %q", behave)
	}
}

func init() {
	preflight.Handle(check, nil)
	preflight.WarmUp(&object{}, &config{})
}

func main() {}
