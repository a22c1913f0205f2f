package ipvs

import (
	"encoding/binary"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

func u64attr(v uint64) []byte { return binary.NativeEndian.AppendUint64(nil, v) }

// The 64-bit statistics are read when the kernel sends them (a count past
// 2^32 stays whole); a kernel that sends only the old set, with 32-bit
// connection and packet counts, is read from that.
func TestDecodeCountersPrefersThe64BitSet(t *testing.T) {
	old := func(b []byte) []byte {
		return nlbatch.Nest(b, destStats|nlbatch.Nested, func(b []byte) []byte {
			b = nlbatch.Attr(b, statsConns, nlbatch.U32(1))
			b = nlbatch.Attr(b, statsInPkts, nlbatch.U32(2))
			b = nlbatch.Attr(b, statsOutPkts, nlbatch.U32(3))
			b = nlbatch.Attr(b, statsInBytes, u64attr(4))
			return nlbatch.Attr(b, statsOutByte, u64attr(5))
		})
	}
	wide := func(b []byte) []byte {
		return nlbatch.Nest(b, destStats64|nlbatch.Nested, func(b []byte) []byte {
			b = nlbatch.Attr(b, statsConns, u64attr(1<<33))
			b = nlbatch.Attr(b, statsInPkts, u64attr(1<<34))
			b = nlbatch.Attr(b, statsOutPkts, u64attr(30))
			b = nlbatch.Attr(b, statsInBytes, u64attr(40))
			return nlbatch.Attr(b, statsOutByte, u64attr(50))
		})
	}
	both := reply(attrDest, func(b []byte) []byte { return wide(old(b)) })
	if got, want := decodeCounters(both, attrDest, destStats, destStats64), (Counters{1 << 33, 1 << 34, 30, 40, 50}); got != want {
		t.Errorf("with both sets: %+v, want %+v", got, want)
	}
	onlyOld := reply(attrDest, old)
	if got, want := decodeCounters(onlyOld, attrDest, destStats, destStats64), (Counters{1, 2, 3, 4, 5}); got != want {
		t.Errorf("with the old set: %+v, want %+v", got, want)
	}
	if got := decodeCounters(reply(attrDest, func(b []byte) []byte { return b }), attrDest, destStats, destStats64); got != (Counters{}) {
		t.Errorf("without statistics: %+v, want zeros", got)
	}
}
