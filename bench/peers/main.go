// Command peers evaluates the dependency-ready rule the way users of two peers of preflight write it, in
// process, for the benchmark `cargo bench -p preflight-engine --bench peers`:
//
//   - CEL (github.com/google/cel-go), what ValidatingAdmissionPolicy users write:
//     `object.spec.dependsOn.all(d, d in available)`, compiled once into a program;
//   - OPA (github.com/open-policy-agent/opa), Rego with a prepared query:
//     `every d in input.spec.dependsOn { d in data.config.available }`, the configuration in OPA's store.
//
// It reads the objects (JSON files named as arguments) once, checks that every contender proceeds on each
// of them and refuses when the configuration lists nothing (so the rule is really evaluated), prints
// "ready", then answers one request per line on stdin, one answer per line on stdout:
//
//	time CONTENDER OBJECT COUNT   COUNT/10 unrecorded evaluations, then COUNT timed ones: their latencies in ns
//	rate CONTENDER OBJECT TOTAL   TOTAL evaluations spread over GOMAXPROCS goroutines: the wall time in ns
//	count CONTENDER OBJECT TOTAL  TOTAL evaluations, untimed (for instruction counts): "done"
//
// OBJECT is the index of an object among the arguments. The contenders:
//
//	cel                the compiled program on the object decoded once (what an informer's cache holds)
//	cel-decoding       the same, decoding the object's JSON first each time
//	opa                the prepared query, the decoded object given with EvalInput (converted each time)
//	opa-parsed-input   the prepared query, the object converted to OPA's value once (EvalParsedInput)
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/interpreter"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

const celRule = `object.spec.dependsOn.all(d, d in available)`

const regoModule = `package preflight

default proceed := false

proceed if {
	every d in input.spec.dependsOn { d in data.config.available }
}
`

// evaluation runs one evaluation of the rule on object number index and says whether it proceeds.
type evaluation func(index int) bool

func main() {
	configFlag := flag.String("config", `{"available":[]}`, "the rule's configuration, as the check's: {\"available\": [...]}")
	flag.Parse()
	var config struct {
		Available []string `json:"available"`
	}
	must(json.Unmarshal([]byte(*configFlag), &config), "the configuration")
	var texts [][]byte
	for _, path := range flag.Args() {
		text, err := os.ReadFile(path)
		must(err, path)
		texts = append(texts, text)
	}
	contenders := build(config.Available, texts)
	refusing := build(nil, texts)
	for name, evaluate := range contenders {
		for index := range texts {
			if !evaluate(index) {
				fail("%s does not proceed on %s", name, flag.Arg(index))
			}
			if refusing[name](index) {
				fail("%s proceeds on %s with nothing available", name, flag.Arg(index))
			}
		}
	}
	fmt.Println("ready")
	serve(contenders)
}

// build compiles the rule for each contender, with `available` as the configuration.
func build(available []string, texts [][]byte) map[string]evaluation {
	decoded := make([]map[string]any, len(texts))
	parsed := make([]ast.Value, len(texts))
	for index, text := range texts {
		must(json.Unmarshal(text, &decoded[index]), "an object")
		value, err := ast.InterfaceToValue(decoded[index])
		must(err, "converting an object for OPA")
		parsed[index] = value
	}
	availableList := make([]any, len(available))
	for index, name := range available {
		availableList[index] = name
	}

	env, err := cel.NewEnv(
		cel.Variable("object", cel.DynType),
		cel.Variable("available", cel.ListType(cel.StringType)),
	)
	must(err, "the CEL environment")
	checked, issues := env.Compile(celRule)
	if issues.Err() != nil {
		must(issues.Err(), "the CEL rule")
	}
	program, err := env.Program(checked)
	must(err, "the CEL program")
	activations := make([]interpreter.Activation, len(texts))
	for index := range texts {
		activations[index], err = interpreter.NewActivation(map[string]any{"object": decoded[index], "available": availableList})
		must(err, "a CEL activation")
	}
	celProceeds := func(activation any) bool {
		out, _, err := program.Eval(activation)
		must(err, "evaluating the CEL rule")
		return out.Value() == true
	}

	store := inmem.NewFromObject(map[string]any{"config": map[string]any{"available": availableList}})
	query, err := rego.New(
		rego.Query("data.preflight.proceed"),
		rego.Module("preflight.rego", regoModule),
		rego.Store(store),
	).PrepareForEval(context.Background())
	must(err, "preparing the Rego query")
	opaProceeds := func(option rego.EvalOption) bool {
		results, err := query.Eval(context.Background(), option)
		must(err, "evaluating the Rego query")
		return len(results) == 1 && results[0].Expressions[0].Value == true
	}

	return map[string]evaluation{
		"cel": func(index int) bool { return celProceeds(activations[index]) },
		"cel-decoding": func(index int) bool {
			var object map[string]any
			must(json.Unmarshal(texts[index], &object), "an object")
			return celProceeds(map[string]any{"object": object, "available": availableList})
		},
		"opa":              func(index int) bool { return opaProceeds(rego.EvalInput(decoded[index])) },
		"opa-parsed-input": func(index int) bool { return opaProceeds(rego.EvalParsedInput(parsed[index])) },
	}
}

// serve answers the requests on stdin until it closes.
func serve(contenders map[string]evaluation) {
	lines := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) != 4 {
			fail("expected `time|rate|count CONTENDER OBJECT COUNT`, got %q", lines.Text())
		}
		evaluate, known := contenders[fields[1]]
		index, indexErr := strconv.Atoi(fields[2])
		count, countErr := strconv.Atoi(fields[3])
		if !known || indexErr != nil || countErr != nil {
			fail("bad request %q", lines.Text())
		}
		switch fields[0] {
		case "time":
			for range count / 10 {
				evaluate(index)
			}
			latencies := make([]string, count)
			for sample := range count {
				started := time.Now()
				proceeds := evaluate(index)
				latencies[sample] = strconv.FormatInt(int64(time.Since(started)), 10)
				if !proceeds {
					fail("%s stopped proceeding", fields[1])
				}
			}
			fmt.Fprintln(out, strings.Join(latencies, " "))
		case "rate":
			fmt.Fprintln(out, int64(inParallel(evaluate, index, int64(count))))
		case "count":
			for range count {
				evaluate(index)
			}
			fmt.Fprintln(out, "done")
		default:
			fail("unknown request %q", fields[0])
		}
		must(out.Flush(), "stdout")
	}
}

// inParallel runs total evaluations on GOMAXPROCS goroutines pulling from one counter and returns the wall time.
func inParallel(evaluate evaluation, index int, total int64) time.Duration {
	var remaining atomic.Int64
	remaining.Store(total)
	var group sync.WaitGroup
	started := time.Now()
	for range runtime.GOMAXPROCS(0) {
		group.Go(func() {
			for remaining.Add(-1) >= 0 {
				evaluate(index)
			}
		})
	}
	group.Wait()
	return time.Since(started)
}

func must(err error, what string) {
	if err != nil {
		fail("%s: %v", what, err)
	}
}

func fail(format string, arguments ...any) {
	fmt.Fprintf(os.Stderr, "peers: "+format+"\n", arguments...)
	os.Exit(1)
}
