// Package svgplot draws the example programs' charts: panels of lines over
// time, stacked in one SVG document, with no dependency beyond the standard
// library. examples/adaptive and examples/breaker plot their simulations
// with it.
package svgplot

import (
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"
)

// A Panel is one chart of the SVG: lines over time, in seconds, with a
// shaded span (the overload or the outage).
type Panel struct {
	Title      string // says what is drawn, and in what unit
	XMax       float64
	Shade      [2]float64 // from, to; none if equal
	ShadeLabel string
	Lines      []Series
}

// A Series is a line of a panel: YS[i] is the value over [i·DT, (i+1)·DT).
// A step series holds each value over its interval (a level, such as a
// limit); the others draw it at the interval's middle. NaN leaves a gap.
type Series struct {
	Name  string
	Color string
	Dash  string // stroke-dasharray; "" for a solid line
	DT    float64
	Step  bool
	YS    []float64
}

// The layout, in pixels: each panel has a header (its title and legend)
// above its plot.
const (
	svgWidth    = 820
	panelHeight = 210
	plotLeft    = 58
	plotRight   = 16
	header      = 40
	axisHeight  = 34
)

// WriteSVG draws the panels stacked, under title, as one SVG document.
func WriteSVG(w io.Writer, title string, panels []Panel) error {
	var b strings.Builder
	height := 30 + len(panels)*panelHeight
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgWidth, height)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14" font-weight="bold">%s</text>`+"\n", plotLeft, esc(title))
	for i, p := range panels {
		p.draw(&b, 30+i*panelHeight)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// draw writes p with its top at y0.
func (p Panel) draw(b *strings.Builder, y0 int) {
	top, bottom := float64(y0+header), float64(y0+panelHeight-axisHeight)
	right := float64(svgWidth - plotRight)
	ymax := 0.0
	for _, s := range p.Lines {
		for _, y := range s.YS {
			if !math.IsNaN(y) {
				ymax = max(ymax, y)
			}
		}
	}
	ystep := niceStep(max(ymax, 1) / 4)
	ymax = math.Ceil(max(ymax, 1)/ystep) * ystep
	x := func(t float64) float64 { return plotLeft + t*(right-plotLeft)/p.XMax }
	y := func(v float64) float64 { return bottom - v*(bottom-top)/ymax }

	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="12" font-weight="bold">%s</text>`+"\n", plotLeft, y0+14, esc(p.Title))
	if p.Shade[1] > p.Shade[0] {
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#fde2e2"/>`+"\n",
			x(p.Shade[0]), top, x(p.Shade[1])-x(p.Shade[0]), bottom-top)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#a33">%s</text>`+"\n", x(p.Shade[0])+4, top+12, esc(p.ShadeLabel))
	}
	for v := 0.0; v <= ymax+ystep/2; v += ystep {
		fmt.Fprintf(b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`, plotLeft, right, y(v), y(v))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", plotLeft-6, y(v)+4, tick(v))
	}
	xstep := niceStep(p.XMax / 8)
	for t := 0.0; t <= p.XMax+xstep/2; t += xstep {
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#999"/>`, x(t), x(t), bottom, bottom+4)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x(t), bottom+16, tick(t))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">time (s)</text>`+"\n", (plotLeft+right)/2, bottom+30)
	fmt.Fprintf(b, `<rect x="%d" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n",
		plotLeft, top, right-plotLeft, bottom-top)

	lx := float64(plotLeft)
	for _, s := range p.Lines {
		for _, pts := range s.polylines(x, y) {
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>`+"\n", s.Color, s.dashAttr(), pts)
		}
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`,
			lx, lx+18, y0+28, y0+28, s.Color, s.dashAttr())
		fmt.Fprintf(b, `<text x="%.1f" y="%d">%s</text>`+"\n", lx+22, y0+32, esc(s.Name))
		lx += 34 + 6.2*float64(utf8.RuneCountInString(s.Name))
	}
}

func (s Series) dashAttr() string {
	if s.Dash == "" {
		return ""
	}
	return fmt.Sprintf(` stroke-dasharray="%s"`, s.Dash)
}

// polylines returns the points of s, in pixels, one list per stretch
// without a gap.
func (s Series) polylines(x, y func(float64) float64) []string {
	var lines []string
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			lines = append(lines, strings.TrimSpace(b.String()))
			b.Reset()
		}
	}
	for i, v := range s.YS {
		if math.IsNaN(v) {
			flush()
			continue
		}
		t := float64(i) * s.DT
		if s.Step {
			fmt.Fprintf(&b, "%.1f,%.1f %.1f,%.1f ", x(t), y(v), x(t+s.DT), y(v))
		} else {
			fmt.Fprintf(&b, "%.1f,%.1f ", x(t+s.DT/2), y(v))
		}
	}
	flush()
	return lines
}

// niceStep returns the smallest of 1, 2 and 5 times a power of ten that is
// at least x.
func niceStep(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// tick formats an axis value: no decimals unless it has some.
func tick(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%g", math.Round(v*1000)/1000)
}

// esc escapes s for the text of an XML element.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}

// Floats converts counts to float64s.
func Floats(counts []int) []float64 {
	ys := make([]float64, len(counts))
	for i, n := range counts {
		ys[i] = float64(n)
	}
	return ys
}

// Constant returns n values v.
func Constant(n int, v float64) []float64 {
	ys := make([]float64, n)
	for i := range ys {
		ys[i] = v
	}
	return ys
}
