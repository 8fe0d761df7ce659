package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
)

// output is the -o flag of one command: json, yaml, name, jsonpath and go-template come
// from cli-runtime's printers; "" (the default) and wide are the command's own view.
type output struct {
	flags *genericclioptions.PrintFlags
}

func addOutputFlag(cmd *cobra.Command) *output {
	pf := genericclioptions.NewPrintFlags("").WithTypeSetter(Scheme)
	pf.AddFlags(cmd)
	if f := cmd.Flags().Lookup("output"); f != nil {
		f.Usage = "Output format. One of: (wide, " + strings.Join(pf.AllowedFormats(), ", ") + "). Default: a human-readable summary."
	}
	return &output{flags: pf}
}

// format is the -o value.
func (p *output) format() string {
	if p == nil || p.flags.OutputFormat == nil {
		return ""
	}
	return *p.flags.OutputFormat
}

// human reports whether the command prints its own view ("" or wide).
func (p *output) human() bool { f := p.format(); return f == "" || f == "wide" }

// wide reports -o wide.
func (p *output) wide() bool { return p.format() == "wide" }

// validate rejects an unknown -o value before anything is changed.
func (p *output) validate() error {
	if p.human() {
		return nil
	}
	if _, err := p.flags.ToPrinter(); err != nil {
		return usageErrorf("%v", err)
	}
	return nil
}

// print writes obj with the -o printer, or calls human for the default and wide views.
func (p *output) print(w io.Writer, obj runtime.Object, human func(w io.Writer, wide bool) error) error {
	if p.human() {
		return human(w, p.wide())
	}
	pr, err := p.flags.ToPrinter()
	if err != nil {
		return usageErrorf("%v", err)
	}
	return pr.PrintObj(obj, w)
}

// table is a tab-aligned writer flushed by the caller.
func table(w io.Writer) interface {
	io.Writer
	Flush() error
} {
	return printers.GetNewTabWriter(w)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress shows a spinner line on stderr while a wait runs, when stdout is a terminal;
// otherwise it is silent.
type progress struct {
	w     io.Writer
	on    bool
	start time.Time
	frame int
	last  string
}

func (o *Options) progress() *progress {
	return &progress{w: o.Streams.ErrOut, on: isTerminal(o.Streams.Out), start: time.Now()}
}

// noValue is what a table shows, and a message says, for a value that is not set.
const noValue = "<none>"

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// step redraws the line with msg.
func (p *progress) step(msg string) {
	if !p.on {
		return
	}
	p.frame++
	p.last = msg
	fmt.Fprintf(p.w, "\r\033[K%s %s (%s)", spinner[p.frame%len(spinner)], msg, time.Since(p.start).Round(time.Second))
}

// done clears the line.
func (p *progress) done() {
	if p.on && p.last != "" {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
