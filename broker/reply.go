package broker

import (
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// Answers shared by the handlers.

// replyBody answers SUCCESS with v encoded in the request's codec family.
func (b *Broker) replyBody(w remoting.ResponseWriter, req *remoting.Command, v any) {
	body, err := remoting.EncodeBody(req.SerializeType, v)
	if err != nil {
		reply(w, req, protocol.SystemError, "broker: encode response: "+err.Error())
		return
	}
	resp := remoting.NewResponse(req, protocol.Success, "")
	resp.Body = body
	_ = w.Write(resp)
}

// replyExt answers SUCCESS with a typed ext header.
func replyExt(w remoting.ResponseWriter, req *remoting.Command, h interface{ ToExt(map[string]string) }) {
	resp := remoting.NewResponse(req, protocol.Success, "")
	resp.ExtFields = protocol.Ext(h)
	_ = w.Write(resp)
}
