package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactions open when the broker was killed.
//
// Kafka ends every aborted transaction with an abort marker in each of its partitions, and
// consumers rely on it: a read_committed consumer (franz-go, like the Java client) treats
// every later batch of the producer as aborted until it reads that marker, and a reader that
// reads a partition up to its last stable offset (platform.ReadCommittedRange) waits for the
// record before that offset. kfake, restarted on the data of a killed broker, aborts the
// transactions that were open (so that the last stable offset moves on) but writes no marker.
// Its log then ends with aborted records no read_committed fetch returns, and the producer's
// next, committed transactions (the same producer id, a new epoch) are hidden from any
// consumer that fetches across them. After a broker-kill in the middle of the router's
// transactions, that stopped the routers for good (their de-duplication restore never reached
// the end of router.dedupe), and could drop committed deliveries at the deliverer.
//
// So Start, on a DataDir, finds the transactions whose data batches have no control batch
// after them (kfake's own rule for "open at the crash") before kfake loads the data, and,
// once kfake has aborted them, writes their abort markers, as Kafka's transaction coordinator
// would, before any client is let in.

// openTxn is a transaction whose data batches in one partition have no marker after them.
type openTxn struct {
	topic       string
	partition   int32
	producerID  int64
	epoch       int16
	firstOffset int64
}

// openTransactions scans the segment files under dataDir (kfake's layout:
// partitions/<escaped topic>-<partition>/<base offset>.dat, each a sequence of Kafka
// RecordBatches) for transactions with no marker after their data.
func openTransactions(dataDir string) ([]openTxn, error) {
	dirs, err := os.ReadDir(filepath.Join(dataDir, "partitions"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var open []openTxn
	for _, d := range dirs {
		i := strings.LastIndexByte(d.Name(), '-')
		if !d.IsDir() || i < 0 {
			continue
		}
		topic, err := url.PathUnescape(d.Name()[:i])
		p, perr := strconv.ParseInt(d.Name()[i+1:], 10, 32)
		if err != nil || perr != nil {
			continue
		}
		txns, err := partitionOpenTransactions(filepath.Join(dataDir, "partitions", d.Name()))
		if err != nil {
			return nil, err
		}
		for _, t := range txns {
			t.topic, t.partition = topic, int32(p)
			open = append(open, t)
		}
	}
	return open, nil
}

// RecordBatch header: baseOffset int64, batchLength int32, partitionLeaderEpoch int32,
// magic int8, crc int32, attributes int16, lastOffsetDelta int32, baseTimestamp int64,
// maxTimestamp int64, producerId int64, producerEpoch int16, ...
const (
	batchHeaderSize   = 12 + 4 + 1 + 4 + 2 + 4 + 8 + 8 + 8 + 2 // through producerEpoch
	attrTransactional = 0x10
	attrControl       = 0x20
)

func partitionOpenTransactions(dir string) ([]openTxn, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []int64
	for _, e := range entries {
		if b, ok := strings.CutSuffix(e.Name(), ".dat"); ok {
			if n, err := strconv.ParseInt(b, 10, 64); err == nil {
				bases = append(bases, n)
			}
		}
	}
	slices.Sort(bases)
	open := map[int64]openTxn{} // producer id → its unmarked transaction
	for _, base := range bases {
		if err := scanSegment(filepath.Join(dir, strconv.FormatInt(base, 10)+".dat"), open); err != nil {
			return nil, err
		}
	}
	var out []openTxn
	for _, t := range open {
		out = append(out, t)
	}
	return out, nil
}

// scanSegment reads the batch headers of one segment file; a torn last batch (the kill
// interrupted its write) ends the scan, as it ends kfake's load.
func scanSegment(path string, open map[int64]openTxn) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var h [batchHeaderSize]byte
	for {
		if _, err := io.ReadFull(f, h[:]); err != nil {
			return nil // the end, or a torn header
		}
		length := int64(binary.BigEndian.Uint32(h[8:12]))
		if length < batchHeaderSize-12 {
			return nil
		}
		attrs := binary.BigEndian.Uint16(h[21:23])
		pid := int64(binary.BigEndian.Uint64(h[43:51]))
		epoch := int16(binary.BigEndian.Uint16(h[51:53]))
		switch {
		case attrs&attrControl != 0:
			delete(open, pid)
		case attrs&attrTransactional != 0:
			if _, ok := open[pid]; !ok {
				open[pid] = openTxn{producerID: pid, epoch: epoch, firstOffset: int64(binary.BigEndian.Uint64(h[0:8]))}
			}
		}
		if _, err := f.Seek(12+length-batchHeaderSize, io.SeekCurrent); err != nil {
			return err
		}
	}
}

// gatedListener is the broker's listener while the markers are written: connections to the
// broker's address wait until ready is closed; the ones to private (the marker writer's)
// are served at once.
type gatedListener struct {
	net.Listener // the broker's address
	private      net.Listener
	conns        chan net.Conn
	done         chan struct{}
	closeOnce    sync.Once
}

func newGatedListener(public, private net.Listener, ready <-chan struct{}) *gatedListener {
	g := &gatedListener{Listener: public, private: private, conns: make(chan net.Conn), done: make(chan struct{})}
	go g.serve(public, ready, true)
	go g.serve(private, nil, false)
	return g
}

func (g *gatedListener) serve(l net.Listener, ready <-chan struct{}, public bool) {
	for {
		c, err := l.Accept()
		if err != nil {
			if public {
				g.Close()
			}
			return
		}
		if ready != nil {
			select {
			case <-ready:
			case <-g.done:
				c.Close()
				return
			}
		}
		select {
		case g.conns <- c:
		case <-g.done:
			c.Close()
			return
		}
	}
}

func (g *gatedListener) Accept() (net.Conn, error) {
	select {
	case c := <-g.conns:
		return c, nil
	case <-g.done:
		return nil, net.ErrClosed
	}
}

func (g *gatedListener) Close() error {
	g.closeOnce.Do(func() { close(g.done) })
	_ = g.private.Close()
	return g.Listener.Close()
}

// closePrivate stops serving the marker writer's address.
func (g *gatedListener) closePrivate() { _ = g.private.Close() }

// abortOpenTransactions writes an abort marker for each transaction in open that kfake
// aborted on load (its partition's last stable offset is past the transaction's first
// offset); one kfake restored as still open (saved by a clean shutdown) is left to its
// producer. It talks to the broker at addr only.
func abortOpenTransactions(ctx context.Context, addr string, open []openTxn) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(3),
		kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	lso := kmsg.NewPtrListOffsetsRequest()
	lso.IsolationLevel = 1 // read_committed: the last stable offset
	byTopic := map[string]int{}
	for _, t := range open {
		i, ok := byTopic[t.topic]
		if !ok {
			i = len(lso.Topics)
			byTopic[t.topic] = i
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = t.topic
			lso.Topics = append(lso.Topics, rt)
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = t.partition
		rp.Timestamp = -1 // the end
		lso.Topics[i].Partitions = append(lso.Topics[i].Partitions, rp)
	}
	lsoResp, err := lso.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("listing last stable offsets: %w", err)
	}
	stable := map[string]map[int32]int64{}
	for _, t := range lsoResp.Topics {
		for _, p := range t.Partitions {
			if kerr.ErrorForCode(p.ErrorCode) == nil {
				if stable[t.Topic] == nil {
					stable[t.Topic] = map[int32]int64{}
				}
				stable[t.Topic][p.Partition] = p.Offset
			}
		}
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	n := 0
	for _, t := range open {
		if off, ok := stable[t.topic][t.partition]; !ok || off <= t.firstOffset {
			continue
		}
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed = t.producerID, t.epoch, false
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = t.topic, []int32{t.partition}
		m.Topics = append(m.Topics, mt)
		req.Markers = append(req.Markers, m)
		n++
	}
	if n == 0 {
		return 0, nil
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("writing abort markers: %w", err)
	}
	var errs []error
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					errs = append(errs, fmt.Errorf("abort marker of producer %d in %s-%d: %w", m.ProducerID, t.Topic, p.Partition, err))
				}
			}
		}
	}
	return n, errors.Join(errs...)
}

// markerTimeout bounds writing the markers at start.
const markerTimeout = 30 * time.Second
