package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/engenho/engenho/actors/activator"
	"github.com/engenho/engenho/actors/service"
	"github.com/engenho/engenho/configs/daemonconfig"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/backend"
	"github.com/engenho/engenho/drivers/objstore/s3"
	"github.com/engenho/engenho/messages"
)

// openStore opens the object store the config names (DRV-8..DRV-10):
// hibernating hosts park their state there behind their lease.
func (d *Daemon) openStore(s Settings) (objstore.Store, string, func() error, error) {
	c := daemonconfig.Defaults()
	if s.Config != nil {
		c = *s.Config
	}
	o := c.Objstore
	l := d.log.With().Str("part", "objstore").Logger()
	cfg := backend.Config{Kind: o.Kind, Prefix: o.Prefix, FS: backend.FSConfig{Dir: o.FS.Dir}, S3: s3.Config{
		Endpoint: o.S3.Endpoint, Region: o.S3.Region, Bucket: o.S3.Bucket, PathStyle: o.S3.PathStyle,
		AccessKey: o.S3.AccessKey, SecretKey: o.S3.SecretKey, SessionToken: o.S3.SessionToken,
		PartSize: int64(o.S3.PartSize), MaxAttempts: o.S3.MaxAttempts, Logger: &l,
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, prefix, closeFn, err := backend.Open(ctx, cfg, d.dir.Root(), d.clk)
	if err != nil {
		return nil, "", nil, fmt.Errorf("object store: %w", err)
	}
	return d.wrapStore(s, store, prefix), prefix, closeFn, nil
}

// activatorEnv is what the activator needs of the node (ACT-*).
func (d *Daemon) activatorEnv(p *parts, rt *runtime, env service.Env) activator.Env {
	id := d.Snapshot().Node
	dep := p.deployer
	return activator.Env{
		Drivers: env.Driver, Store: p.store, Prefix: p.prefix,
		NodeName: id.Name, NodeID: id.ID, Journal: p.journal, Events: env.Events, Metrics: d.metrics,
		Routes: rt.routes, HostsDir: d.dir.Hosts(), Bin: d.opts.Bin, StepTimeout: d.settings.StepTimeout,
		Committed: func(stack, svc string) (messages.HostDefinition, bool) { return dep.committedHost(stack, svc) },
	}
}

// committedHost reads a hibernating service's committed definition from the
// journal: a wake never runs on a copy older than the last deployment
// (ACT-4).
func (d *Deployer) committedHost(stack, svc string) (messages.HostDefinition, bool) {
	st, found, err := d.journal.Stack(stack)
	if err != nil || !found {
		return messages.HostDefinition{}, false
	}
	m, err := d.applyMessage(st)
	if err != nil {
		return messages.HostDefinition{}, false
	}
	def, ok := m.Current.Definition.Services[svc]
	if !ok {
		return messages.HostDefinition{}, false
	}
	return messages.HostDefinition{Stack: stack, Service: svc, Deployment: m.Current.ID,
		Revision: m.Current.Revision(svc), Definition: def, Stopped: m.Stopped[svc]}, true
}
