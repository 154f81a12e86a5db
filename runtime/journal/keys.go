package journal

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Key layout. Every key starts with the layout version, then the record
// type, then the record's identity. Names are validated (SEC-3) so they
// never contain the separator.
const (
	keyVersion = "v1/"

	PrefixMeta      = keyVersion + "meta/"
	PrefixBoot      = keyVersion + "boot/"
	KeyIdentity     = keyVersion + "identity"
	PrefixDeploySeq = keyVersion + "deploy-seq/"
	PrefixDesired   = keyVersion + "desired/"
	PrefixStopped   = keyVersion + "stopped/"
	PrefixRollout   = keyVersion + "rollout/"
	PrefixFailed    = keyVersion + "failed/"
	PrefixDue       = keyVersion + "due/"
	PrefixOwed      = keyVersion + "owed/"
	PrefixEvent     = keyVersion + "event/"
	PrefixAudit     = keyVersion + "audit/"

	keyEventSeq = PrefixMeta + "event-seq"
	keyAuditSeq = PrefixMeta + "audit-seq"
)

// Numbers in keys are zero-padded to 20 digits so that byte order is
// numeric order and keys stay readable in a dump.
func num(n uint64) string { return fmt.Sprintf("%020d", n) }

func parseNum(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) }

func bootKey(n uint64) []byte  { return []byte(PrefixBoot + num(n)) }
func eventKey(n uint64) []byte { return []byte(PrefixEvent + num(n)) }
func auditKey(n uint64) []byte { return []byte(PrefixAudit + num(n)) }

func deploySeqKey(stack string) []byte { return []byte(PrefixDeploySeq + stack) }
func desiredKey(stack string) []byte   { return []byte(PrefixDesired + stack) }

func stoppedKey(stack, service string) []byte {
	return []byte(PrefixStopped + stack + "/" + service)
}

func rolloutKey(stack, service string) []byte {
	return []byte(PrefixRollout + stack + "/" + service)
}

func failedPrefix(stack, service string) string {
	if service == "" {
		return PrefixFailed + stack + "/"
	}
	return PrefixFailed + stack + "/" + service + "/"
}

func failedKey(stack, service string, deployment uint64, revision string) []byte {
	return []byte(failedPrefix(stack, service) + num(deployment) + "/" + revision)
}

func dueKey(host string) []byte  { return []byte(PrefixDue + host) }
func owedKey(host string) []byte { return []byte(PrefixOwed + host) }

// seqFromKey reads the number at the end of a boot or event key.
func seqFromKey(key []byte, prefix string) (uint64, error) {
	s, ok := strings.CutPrefix(string(key), prefix)
	if !ok {
		return 0, fmt.Errorf("key %q lacks prefix %q", key, prefix)
	}
	return parseNum(s)
}

var (
	nameRE     = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	serviceRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	revisionRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
	hostRE     = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)
)

// checkName validates a stack, service or host name (SVC-1, SEC-3).
func checkName(field, name string) error {
	if !nameRE.MatchString(name) {
		return invalid(field, "%q must match [a-z0-9][a-z0-9-]{0,62}", name)
	}
	return nil
}

// checkServiceName validates a service name: a stack name that may also
// hold "_", as Compose allows (stackfile.ValidServiceName). "_" is not the
// key separator, so it is as safe in a key (SEC-3).
func checkServiceName(field, name string) error {
	if !serviceRE.MatchString(name) {
		return invalid(field, "%q must match [a-z0-9][a-z0-9_-]{0,62}", name)
	}
	return nil
}

// checkHost validates a host name: a lower-case DNS name, as hibernate.host
// is (ACT-1, SEC-3). Dots are safe in keys; '/' and ".." never pass.
func checkHost(host string) error {
	if len(host) > 253 || !hostRE.MatchString(host) {
		return invalid("host", "%q must be a lower-case DNS name", host)
	}
	return nil
}

func checkRevision(field, rev string) error {
	if !revisionRE.MatchString(rev) {
		return invalid(field, "%q must be 1-128 characters of [A-Za-z0-9._:-]", rev)
	}
	return nil
}
