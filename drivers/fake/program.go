package fake

import (
	"strconv"
	"strings"
	"time"
)

// Program is what one run of a fake instance does: its steps in order. A
// program that reaches its end exits with the status of its last step;
// Forever keeps it running until stopped, killed or made to die.
type Program struct {
	Steps   []Step
	Forever bool
}

// Step is one statement of a program.
type Step struct {
	Wait       time.Duration // sleep (on the driver's clock) before the rest
	Stdout     string        // written to the instance's log
	Stderr     string        // written to the instance's log too
	Status     int           // the status this step leaves (echo 0, unknown command 127)
	Exit       bool          // end the run here with Status
	IgnoreTerm bool          // Stop's SIGTERM is ignored from here on
}

// RunForever is the program of a command the fake cannot read.
var RunForever = Program{Forever: true}

// ProgramFor is the default program for a command: Shell's reading of
// `sh -c SCRIPT`, or RunForever for anything else.
func ProgramFor(command []string) Program {
	if script, ok := shellScript(command); ok {
		return Shell(script)
	}
	return RunForever
}

func shellScript(argv []string) (string, bool) {
	if len(argv) == 3 && (argv[0] == "sh" || argv[0] == "/bin/sh") && argv[1] == "-c" {
		return argv[2], true
	}
	return "", false
}

// Shell reads script as a tiny subset of sh: statements separated by ";" or
// newlines, each one of
//
//	echo WORD... [>&2]   a line on stdout (stderr with >&2)
//	sleep N              N seconds (decimal allowed)
//	exit [N]             end the run with N (default: the last status)
//	trap '' TERM         ignore SIGTERM from here on
//	true, :              status 0;  false: status 1
//
// Anything else is a command not found: a line on stderr and status 127, as
// sh would do. Quotes around a word are dropped; there is no expansion.
func Shell(script string) Program {
	var p Program
	for _, stmt := range splitStatements(script) {
		p.Steps = append(p.Steps, shellStep(stmt))
	}
	return p
}

func splitStatements(script string) []string {
	var out []string
	for _, line := range strings.Split(script, "\n") {
		for _, s := range strings.Split(line, ";") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

func shellStep(stmt string) Step {
	words := strings.Fields(stmt)
	for i, w := range words {
		words[i] = unquote(w)
	}
	switch words[0] {
	case "echo":
		args := words[1:]
		toErr := len(args) > 0 && args[len(args)-1] == ">&2"
		if toErr {
			args = args[:len(args)-1]
		}
		line := strings.Join(args, " ") + "\n"
		if toErr {
			return Step{Stderr: line}
		}
		return Step{Stdout: line}
	case "sleep":
		if len(words) == 2 {
			if secs, err := strconv.ParseFloat(words[1], 64); err == nil && secs >= 0 {
				return Step{Wait: time.Duration(secs * float64(time.Second))}
			}
		}
		return Step{Stderr: "sleep: invalid time interval\n", Status: 1}
	case "exit":
		if len(words) == 1 {
			return Step{Exit: true, Status: -2} // -2: the last status, resolved at run time
		}
		code, err := strconv.Atoi(words[1])
		if err != nil {
			return Step{Exit: true, Status: 2, Stderr: "sh: exit: Illegal number: " + words[1] + "\n"}
		}
		return Step{Exit: true, Status: code & 0xff}
	case "trap":
		if len(words) == 3 && words[1] == "" && words[2] == "TERM" {
			return Step{IgnoreTerm: true}
		}
		return Step{}
	case "true", ":":
		return Step{}
	case "false":
		return Step{Status: 1}
	}
	return Step{Stderr: "sh: " + words[0] + ": not found\n", Status: 127}
}

func unquote(w string) string {
	if len(w) >= 2 && (w[0] == '\'' && w[len(w)-1] == '\'' || w[0] == '"' && w[len(w)-1] == '"') {
		return w[1 : len(w)-1]
	}
	return w
}

// runToEnd evaluates p without waiting (exec probes): the output and the
// exit status.
func runToEnd(p Program) (stdout, stderr string, status int) {
	var out, errb strings.Builder
	for _, s := range p.Steps {
		out.WriteString(s.Stdout)
		errb.WriteString(s.Stderr)
		if s.Exit {
			if s.Status != -2 {
				status = s.Status
			}
			return out.String(), errb.String(), status
		}
		status = s.Status
	}
	return out.String(), errb.String(), status
}
