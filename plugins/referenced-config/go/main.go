// Command referenced-config is the Go build of plugins/referenced-config: do not reconcile until the
// ConfigMap an object references exists (and holds the required key); retry after a delay with jitter. The
// same configuration and answers:
//
//	{"requiredKey": "endpoint", "retryAfterSeconds": 60, "jitterPercent": 10}
package main

import (
	"fmt"
	"time"

	"github.com/preflight-wasm/preflight/guest-sdk/go/preflight"
)

type object struct {
	Spec struct {
		ConfigRef string `json:"configRef"`
	} `json:"spec"`
}

type config struct {
	RequiredKey       *string `json:"requiredKey"`
	RetryAfterSeconds uint32  `json:"retryAfterSeconds"`
	JitterPercent     uint32  `json:"jitterPercent"`
}

type configMap struct {
	Data map[string]string `json:"data"`
}

func check(request preflight.Request) preflight.Outcome {
	var gated object
	if err := request.DecodeObject(&gated); err != nil {
		return preflight.InvalidObject(err)
	}
	settings := config{RetryAfterSeconds: 60, JitterPercent: 10}
	if err := request.DecodeConfig(&settings); err != nil {
		return preflight.Errorf("invalid check configuration: %v", err).Because("InvalidConfig", "")
	}
	name := gated.Spec.ConfigRef
	if name == "" {
		return preflight.Errorf("spec.configRef is empty").Because("InvalidSpec", "")
	}
	waiting := func(reason, what string) preflight.Outcome {
		retryAfter := time.Duration(settings.RetryAfterSeconds) * time.Second
		delay := preflight.WithJitter(retryAfter, settings.JitterPercent, request.Target)
		return preflight.RequeueAfter(delay).Because(reason,
			fmt.Sprintf("%s; checking again every %d s", what, settings.RetryAfterSeconds))
	}
	var found configMap
	present, err := preflight.Get("v1", "ConfigMap", "", name, &found)
	if err != nil {
		return preflight.Error(err)
	}
	if !present {
		return waiting("ConfigMissing", "waiting for ConfigMap "+name)
	}
	if key := settings.RequiredKey; key != nil {
		if _, holds := found.Data[*key]; !holds {
			return waiting("ConfigIncomplete", fmt.Sprintf("ConfigMap %s has no key %s", name, *key))
		}
	}
	return preflight.Proceed().Because("ConfigPresent", fmt.Sprintf("ConfigMap %s is there", name))
}

func init() {
	preflight.Handle(check, nil)
	preflight.WarmUp(&object{}, &config{}, &configMap{})
}

func main() {}
