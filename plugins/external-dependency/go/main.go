// Command external-dependency is the Go build of plugins/external-dependency, answering exactly as the Rust
// build: do not reconcile until an external system says the dependency exists; then expose its key. The
// object names its dependency in spec.dependency; GET {endpoint}{dependency} answers 200 with {"key": ...}
// (proceed, and output the key), 404 (requeue after retryAfterSeconds plus jitter), or anything else (an
// error). The check's ConfigMap must grant the endpoint (its `http` key).
//
//	{"endpoint": "https://deps.example.com/dependencies/", "retryAfterSeconds": 600, "jitterPercent": 10}
package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/preflight-wasm/preflight/guest-sdk/go/preflight"
)

// object is the part of the object this check reads.
type object struct {
	Spec struct {
		Dependency string `json:"dependency"`
	} `json:"spec"`
}

// config is the check's configuration, with its defaults.
type config struct {
	Endpoint          string `json:"endpoint"`
	RetryAfterSeconds uint32 `json:"retryAfterSeconds"`
	JitterPercent     uint32 `json:"jitterPercent"`
	OutputKey         string `json:"outputKey"`
}

func defaults() config {
	return config{RetryAfterSeconds: 600, JitterPercent: 10, OutputKey: "dependencyKey"}
}

func check(request preflight.Request) preflight.Outcome {
	var gated object
	if err := request.DecodeObject(&gated); err != nil {
		return preflight.InvalidObject(err)
	}
	settings := defaults()
	if err := request.DecodeConfig(&settings); err != nil {
		return preflight.Errorf("invalid check configuration: %v", err).Because("InvalidConfig", "")
	}
	dependency := gated.Spec.Dependency
	if dependency == "" {
		return preflight.Errorf("spec.dependency is empty").Because("InvalidSpec", "")
	}
	if !plainName(dependency) {
		return preflight.Errorf("spec.dependency %q is not a plain name", dependency).Because("InvalidSpec", "")
	}
	url := settings.Endpoint + dependency
	response, err := preflight.HTTPGet(url)
	if err != nil {
		return preflight.Error(err)
	}
	switch response.Status {
	case 200:
		var found struct {
			Key string `json:"key"`
		}
		if err := response.JSON(&found); err != nil {
			return preflight.Error(err)
		}
		return preflight.Proceed().Because("DependencyAvailable", dependency+" is available").
			Output(settings.OutputKey, found.Key)
	case 404:
		retryAfter := time.Duration(settings.RetryAfterSeconds) * time.Second
		delay := preflight.WithJitter(retryAfter, settings.JitterPercent, request.Target)
		return preflight.RequeueAfter(delay).Because("DependencyMissing", fmt.Sprintf(
			"%s does not exist yet; checking again every %d s", dependency, settings.RetryAfterSeconds))
	default:
		return preflight.Errorf("%s answered %d", url, response.Status)
	}
}

// plainName: ASCII letters, digits, '-', '_' and '.', as the other builds accept.
func plainName(name string) bool {
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.", c) >= 0) {
			return false
		}
	}
	return true
}

func validate(raw map[string]any) error {
	var unknown []string
	for key := range raw {
		switch key {
		case "endpoint", "retryAfterSeconds", "jitterPercent", "outputKey":
		default:
			unknown = append(unknown, key)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("unknown field `%s`", unknown[0])
	}
	endpoint, _ := raw["endpoint"].(string)
	if !strings.HasPrefix(endpoint, "http://") && !strings.HasPrefix(endpoint, "https://") {
		return fmt.Errorf("endpoint %q must be an http:// or https:// URL", endpoint)
	}
	if retry, present := raw["retryAfterSeconds"]; present && retry == float64(0) {
		return fmt.Errorf("retryAfterSeconds must be at least 1")
	}
	return nil
}

func init() {
	preflight.Handle(check, validate)
	preflight.WarmUp(&object{}, &config{})
}

func main() {}
