package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// writeSVG draws the load of both runs per second as two lines over a shaded
// outage.
func (sc scenario) writeSVG(w io.Writer, without, with []int) {
	const width, height, left, bottom, top = 640, 300, 50, 30, 20
	peak := 1
	for _, n := range without {
		peak = max(peak, n)
	}
	for _, n := range with {
		peak = max(peak, n)
	}
	peak = (peak + 999) / 1000 * 1000
	x := func(s int) float64 { return left + float64(s)*(width-left-10)/float64(len(without)) }
	y := func(n int) float64 { return height - bottom - float64(n)*(height-bottom-top)/float64(peak) }
	line := func(load []int) string {
		var b strings.Builder
		for s, n := range load {
			fmt.Fprintf(&b, "%.1f,%.1f ", x(s), y(n))
		}
		return b.String()
	}
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	from, to := int(sc.outageStart/time.Second), int(sc.outageEnd/time.Second)
	fmt.Fprintf(w, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#fde2e2"/>`+"\n", x(from), top, x(to)-x(from), height-bottom-top)
	fmt.Fprintf(w, `<text x="%.1f" y="%d">dependency down</text>`+"\n", x(from)+4, top+12)
	for n := 0; n <= peak; n += 1000 {
		fmt.Fprintf(w, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="4" y="%.1f">%d/s</text>`+"\n",
			left, width-10, y(n), y(n), y(n)+4, n)
	}
	for s := 0; s <= len(without); s += 20 {
		fmt.Fprintf(w, `<text x="%.1f" y="%d">%d s</text>`+"\n", x(s)-8, height-10, s)
	}
	fmt.Fprintf(w, `<polyline fill="none" stroke="#c0392b" stroke-width="1.5" points="%s"/>`+"\n", line(without))
	fmt.Fprintf(w, `<polyline fill="none" stroke="#2471a3" stroke-width="1.5" points="%s"/>`+"\n", line(with))
	fmt.Fprintf(w, `<text x="%d" y="%d" fill="#c0392b">no budget</text><text x="%d" y="%d" fill="#2471a3">10%% retry budget</text>`+"\n",
		width-200, top+12, width-120, top+12)
	fmt.Fprintln(w, "</svg>")
}
