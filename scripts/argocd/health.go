// Command argocd-health evaluates a resource health script the way Argo CD does, with
// Argo CD's own Lua VM (util/lua): the script's path is the argument, the object comes
// as JSON on stdin, and the health status goes to stdout as JSON. Built by
// scripts/argocd-health.sh so tests run the chart's script exactly as Argo CD would.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/argoproj/argo-cd/v3/util/lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: argocd-health SCRIPT.lua < object.json")
		os.Exit(2)
	}
	script, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var obj map[string]any
	if err := json.NewDecoder(os.Stdin).Decode(&obj); err != nil {
		fmt.Fprintln(os.Stderr, "object:", err)
		os.Exit(2)
	}
	status, err := lua.VM{}.ExecuteHealthLua(&unstructured.Unstructured{Object: obj}, string(script))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out := map[string]string{"status": string(status.Status), "message": status.Message}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
