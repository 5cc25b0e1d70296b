package catalog

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"sync"
)

// A document larger than HoldMax, of a known size, is read by
// ScanLayout in blocks of whole records where more than one processor
// runs: a goroutine reads the document (still in order, from one reader)
// into blocks, cut after a record's end; scanWorkers goroutines read and
// check each block's records as Scan reads them, noting their paths and
// offsets and keeping those picked; the caller's goroutine joins the
// blocks' layouts and records in order. A record's bytes end with "\n    }" followed, unless it is the
// last, by ","; no string holds a raw newline and nothing else in the
// document closes at that indent, so a block cut there holds whole
// records, and read from a record's end on, its records are those a
// scan of the whole document reads (a block whose records do not end
// where it is cut is not in Marshal's form, ErrNotStreamed).
const (
	scanBlockSize = 4 << 20
	scanWorkers   = 2
	// scanInFlight bounds the blocks read ahead of fn.
	scanInFlight = 2 * scanWorkers
)

// recordCut is where a block is cut: after the "}" of a record followed
// by another.
const recordCut = "\n    },"

// scanBlock is one block: its bytes, and once done is closed, its
// records' layout and those picked (and the head, in the first), or
// what ended their read.
type scanBlock struct {
	data        []byte
	base        int64 // the document's offset of data[0]
	first, last bool
	done        chan struct{}
	lay         Layout
	picked      []Output
	head        Head
	err         error
}

// ScanLayout reads a catalog in Marshal's form from r (size bytes, -1
// if unknown) as Scan does, noting every record's path and offset in lay
// (of a sparse layout, its runs of records), and returns its head and the records pick picks, kept (Keeper), in path
// order. A large document is read in blocks beside each other: pick is
// then called from several goroutines at once. Its errors are Scan's.
func ScanLayout(r io.Reader, size int64, lay *Layout, pick func(*Output) bool) (Head, []Output, error) {
	if size > HoldMax && runtime.GOMAXPROCS(0) > 1 {
		return scanBlocks(r, scanBlockSize, lay, pick)
	}
	var keeper Keeper
	var picked []Output
	h, err := Scan(r, size, func(rec *Record) error {
		lay.Add(rec)
		if pick(&rec.Output) {
			picked = append(picked, keeper.Keep(rec))
		}
		return nil
	})
	return h, picked, err
}

// scanBlocks is ScanLayout of r in blocks of about blockSize bytes.
func scanBlocks(r io.Reader, blockSize int, lay *Layout, pick func(*Output) bool) (Head, []Output, error) {
	quit := make(chan struct{})
	free := make(chan *scanBlock, scanInFlight)
	for range scanInFlight {
		free <- &scanBlock{lay: Layout{runBytes: lay.runBytes}} // as lay: sparse or not
	}
	jobs := make(chan *scanBlock, scanInFlight)
	order := make(chan *scanBlock, scanInFlight)
	var wg sync.WaitGroup
	wg.Add(1 + scanWorkers)
	go func() {
		defer wg.Done()
		readBlocks(r, blockSize, free, jobs, order, quit)
	}()
	for range scanWorkers {
		go func() {
			defer wg.Done()
			times := map[string]canonTime{}
			var keeper Keeper
			for b := range jobs {
				b.read(times, pick, &keeper)
				close(b.done)
			}
		}()
	}
	h, picked, err := joinBlocks(order, free, lay)
	close(quit)
	for range order {
		// Drained: the reader stops at quit, the workers when it does.
	}
	wg.Wait()
	return h, picked, err
}

// joinBlocks joins the blocks' layouts into lay and their records
// picked, in order, checking the path order across blocks, and hands
// each block back to be read into again.
func joinBlocks(order <-chan *scanBlock, free chan<- *scanBlock, lay *Layout) (Head, []Output, error) {
	var h Head
	var picked []Output
	for b := range order {
		<-b.done
		if b.err != nil {
			return Head{}, nil, b.err
		}
		if b.first {
			h = b.head
		}
		if lay.Len() > 0 && b.lay.Len() > 0 && lay.lastPath() >= b.lay.firstPath() {
			return Head{}, nil, errNotStreamed("records out of path order")
		}
		lay.join(&b.lay)
		picked = append(picked, b.picked...)
		if b.last {
			return h, picked, nil
		}
		free <- b
	}
	return Head{}, nil, errNotStreamed("a catalog cut short")
}

// read reads the block's records (and head, in the first).
func (b *scanBlock) read(times map[string]canonTime, pick func(*Output) bool, keeper *Keeper) {
	s := &streamScan{buf: b.data, base: b.base, eof: true, check: true, times: times}
	n := 1
	if b.first {
		if b.head, b.err = s.head(); b.err != nil {
			return
		}
		n = 0
	}
	b.err = s.records(n, b.last, func(rec *Record) error {
		b.lay.Add(rec)
		if pick(&rec.Output) {
			b.picked = append(b.picked, keeper.Keep(rec))
		}
		return nil
	})
}

// readBlocks reads r into blocks, cut after a record's end, and hands
// each to the workers (jobs) and, in order, to the caller (order) until
// r ends, fails (the block then carries the error) or quit closes.
func readBlocks(r io.Reader, blockSize int, free chan *scanBlock, jobs, order chan<- *scanBlock, quit <-chan struct{}) {
	defer close(order)
	defer close(jobs)
	var carry []byte // read past the last block's cut
	var base int64
	for first := true; ; {
		var b *scanBlock
		select {
		case b = <-free:
		case <-quit:
			return
		}
		buf := b.data
		if cap(buf) < len(carry)+blockSize {
			buf = make([]byte, 0, len(carry)+blockSize)
		}
		buf = append(buf[:0], carry...)
		n, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		end := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		*b = scanBlock{data: buf, base: base, first: first, last: true, done: make(chan struct{}), lay: b.lay.reset()}
		switch {
		case err != nil && !end:
			b.err = err
			close(b.done)
		case !end:
			cut := bytes.LastIndex(buf, []byte(recordCut))
			if cut < 0 { // no whole record yet: read on, into more
				carry = append(carry[:0], buf...)
				free <- b
				continue
			}
			cut += len(recordCut) - 1
			carry = append(carry[:0], buf[cut:]...)
			b.data, b.last = buf[:cut], false
		}
		base += int64(len(b.data))
		first = false
		if b.err == nil {
			select {
			case jobs <- b:
			case <-quit:
				return
			}
		}
		select {
		case order <- b:
		case <-quit:
			return
		}
		if b.last {
			return
		}
	}
}
