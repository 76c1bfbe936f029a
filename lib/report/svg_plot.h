// A small line-chart writer for `needle bench --svg`: one or more panels (e.g. prefill and decode
// tok/s) sharing an x axis (threads, prompt tokens, ...), one polyline per series, a legend.
// Plain SVG 1.1 text; no dependencies.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace needle::report {

struct PlotSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in x order
};

struct PlotPanel {
  std::string title;    // e.g. "decode tok/s"
  std::string y_label;  // e.g. "tok/s"
  std::vector<PlotSeries> series;
};

// The whole chart: panels side by side, the x axis label under each, the series' legend (same
// colour per series index in every panel) below. Non-finite points are left out.
std::string RenderSvgPlot(const std::string& title, const std::string& x_label,
                          const std::vector<PlotPanel>& panels);

}  // namespace needle::report
