package soak

import (
	"fmt"
	"os"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// PlotPNG draws a panel per metric (Metrics), a line per source, against minutes since the
// start, and writes it to path as a PNG.
func PlotPNG(path string, pts []Point, d time.Duration) error {
	const cols = 4
	rows := (len(Metrics) + cols - 1) / cols
	plots := make([][]*plot.Plot, rows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	for i, metric := range Metrics {
		p := plot.New()
		p.Title.Text = metric
		p.X.Label.Text = "minutes"
		p.Legend.Top = true
		p.Legend.Left = true
		p.Y.Min = 0
		var sources []string
		lines := map[string]plotter.XYs{}
		for _, pt := range pts {
			if pt.Metric != metric {
				continue
			}
			if _, ok := lines[pt.Source]; !ok {
				sources = append(sources, pt.Source)
			}
			lines[pt.Source] = append(lines[pt.Source], plotter.XY{X: pt.At.Minutes(), Y: pt.Value})
		}
		slices.Sort(sources)
		var args []any
		for _, s := range sources {
			args = append(args, s, lines[s])
			for _, xy := range lines[s] {
				p.Y.Max = max(p.Y.Max, xy.Y*1.5)
			}
		}
		if len(args) > 0 {
			if err := plotutil.AddLinePoints(p, args...); err != nil {
				return fmt.Errorf("panel %s: %w", metric, err)
			}
		}
		p.X.Min, p.X.Max = 0, max(d.Minutes(), p.X.Max)
		p.Y.Max = max(p.Y.Max, 1)
		plots[i/cols][i%cols] = p
	}
	img := vgimg.New(vg.Points(float64(cols)*300), vg.Points(float64(rows)*260))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for j := range plots {
		for i, p := range plots[j] {
			if p != nil {
				p.Draw(canvases[j][i])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
