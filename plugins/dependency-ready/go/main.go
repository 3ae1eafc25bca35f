// Command dependency-ready is the Go build of plugins/dependency-ready: do not reconcile until the
// dependencies an object names are available; retry in N minutes, with jitter. The same configuration,
// answers and fixtures (plugins/dependency-ready/fixtures.yaml):
//
//	{"available": ["postgres-main"], "retryAfterSeconds": 600, "jitterPercent": 10}
package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/preflight-wasm/preflight/guest-sdk/go/preflight"
)

// object is the part of the object this check reads.
type object struct {
	Spec struct {
		DependsOn []string `json:"dependsOn"`
	} `json:"spec"`
}

// config is the check's configuration.
type config struct {
	Available         []string `json:"available"`
	RetryAfterSeconds uint32   `json:"retryAfterSeconds"`
	JitterPercent     uint32   `json:"jitterPercent"`
}

func check(request preflight.Request) preflight.Outcome {
	var gated object
	if err := request.DecodeObject(&gated); err != nil {
		return preflight.InvalidObject(err)
	}
	settings := config{RetryAfterSeconds: 600, JitterPercent: 10}
	if err := request.DecodeConfig(&settings); err != nil {
		return preflight.Errorf("invalid check configuration: %v", err).Because("InvalidConfig", "")
	}
	var missing []string
	for _, name := range gated.Spec.DependsOn {
		if !slices.Contains(settings.Available, name) {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return preflight.Proceed().Because("DependenciesAvailable", "all dependencies are available")
	}
	retryAfter := time.Duration(settings.RetryAfterSeconds) * time.Second
	delay := preflight.WithJitter(retryAfter, settings.JitterPercent, request.Target)
	preflight.Debug("%s is waiting for %s", request.Target.Name, strings.Join(missing, ", "))
	return preflight.RequeueAfter(delay).Because("DependencyMissing",
		fmt.Sprintf("waiting for %s; checking again every %d s", strings.Join(missing, ", "), settings.RetryAfterSeconds))
}

func validate(raw map[string]any) error {
	if available, present := raw["available"]; present {
		if _, isList := available.([]any); !isList {
			return errors.New("available must be a list of names")
		}
	}
	return nil
}

func init() {
	preflight.Handle(check, validate)
	preflight.WarmUp(&object{}, &config{})
}

func main() {}
