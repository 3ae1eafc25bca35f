// Command {{name}} is a preflight check. While the object's spec.paused is true, do not reconcile it:
// evaluate again after retryAfterSeconds (configuration, default 60).
package main

import (
	"fmt"
	"time"

	"github.com/preflight-wasm/preflight/guest-sdk/go/preflight"
)

type object struct {
	Spec struct {
		Paused bool `json:"paused"`
	} `json:"spec"`
}

type config struct {
	RetryAfterSeconds uint32 `json:"retryAfterSeconds"`
}

func check(request preflight.Request) preflight.Outcome {
	var gated object
	if err := request.DecodeObject(&gated); err != nil {
		return preflight.InvalidObject(err)
	}
	settings := config{RetryAfterSeconds: 60}
	if err := request.DecodeConfig(&settings); err != nil {
		return preflight.Errorf("invalid check configuration: %v", err).Because("InvalidConfig", "")
	}
	if gated.Spec.Paused {
		return preflight.RequeueAfter(time.Duration(settings.RetryAfterSeconds)*time.Second).
			Because("Paused", fmt.Sprintf("paused; checking again in %d s", settings.RetryAfterSeconds))
	}
	return preflight.Proceed().Because("Ready", "not paused")
}

func init() {
	preflight.Handle(check, nil)
	preflight.WarmUp(&object{}, &config{})
}

func main() {}
