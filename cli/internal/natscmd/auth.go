package natscmd

import (
	"log/slog"

	"github.com/nats-io/nats-server/v2/server"

	"shindo.dev/lib/natsbus"
	"shindo.dev/lib/peerid"
)

// roleAuth admits a client under mutual TLS by the identity its verified
// certificate names, with what its role may do on this site's server: the
// certificate is the network's (the TLS layer checked the chain), the
// permissions are ours. A client naming no identity, or a role that uses
// no NATS, is refused.
type roleAuth struct {
	site string
	log  *slog.Logger
}

func (a roleAuth) Check(c server.ClientAuthentication) bool {
	st := c.GetTLSConnectionState()
	if st == nil || len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		a.log.Warn("nats client refused: no verified certificate", slog.Any("remote", c.RemoteAddress()))
		return false
	}
	id, ok := peerid.Of(st.VerifiedChains[0][0])
	if !ok {
		a.log.Warn("nats client refused: its certificate names no shindo identity", slog.Any("remote", c.RemoteAddress()))
		return false
	}
	perms, ok := permissions(id, a.site)
	if !ok {
		a.log.Warn("nats client refused: its role uses no NATS", slog.String("identity", id.String()), slog.Any("remote", c.RemoteAddress()))
		return false
	}
	c.RegisterUser(&server.User{Username: id.String(), Permissions: perms})
	return true
}

// permissions are what a role may publish and subscribe to on the server
// of site, from the hops of the NATS contract (lib/natsbus). They deny
// rather than allow: JetStream's API and reply subjects are many and
// internal to the client library, while what must not happen is short —
// a part feeding what another part owns (an edge publishing snapshots or
// detections, answering the cores' sync), another site's part answering
// for this site, any part but an operator deleting or purging a stream.
func permissions(id peerid.Identity, site string) (*server.Permissions, bool) {
	here := id.Site == site
	rtsOwn := []string{natsbus.Snapshots.Filter(), natsbus.Detections.Filter()}
	syncServe := natsbus.Sync.Filter()
	detectorServe := natsbus.DetectorSync.Filter()
	streamAdmin := []string{"$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.PURGE.>", "$JS.API.ACCOUNT.PURGE.>"}
	deny := func(pub, sub []string) *server.Permissions {
		return &server.Permissions{
			Publish:   &server.SubjectPermission{Deny: append(pub, streamAdmin...)},
			Subscribe: &server.SubjectPermission{Deny: sub},
		}
	}
	switch id.Role {
	case peerid.Operator:
		return &server.Permissions{}, true
	case peerid.RTS:
		pub := []string{natsbus.Notifications.Filter(), syncServe}
		sub := []string{syncServe}
		if !here {
			// The peer core's RTS asks here; it publishes nothing of
			// this site's and answers no question here.
			pub = append(pub, rtsOwn...)
			sub = append(sub, detectorServe)
		}
		return deny(pub, sub), true
	case peerid.Ingest:
		sub := []string{detectorServe}
		if !here {
			sub = append(sub, syncServe) // asks here, answers at home
		}
		return deny(append([]string{natsbus.Notifications.Filter(), detectorServe}, rtsOwn...), sub), true
	case peerid.DataAPI:
		return deny(append([]string{natsbus.Notifications.Filter(), syncServe, detectorServe}, rtsOwn...), []string{syncServe, detectorServe}), true
	case peerid.Edge:
		return deny(append([]string{syncServe, detectorServe}, rtsOwn...), []string{syncServe, detectorServe}), true
	}
	return nil, false
}
