// SVG line charts.
#include "report/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace needle::report {

namespace {

constexpr double kPanelW = 420, kPanelH = 300, kMarginL = 64, kMarginR = 16, kMarginT = 48,
                 kMarginB = 44, kLegendRow = 18;
constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string Escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A "nice" step (1, 2 or 5 times a power of ten) giving about `ticks` intervals over `span`.
double NiceStep(double span, int ticks) {
  if (!(span > 0)) return 1;
  const double raw = span / ticks;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

std::string Num(double v) {
  if (std::fabs(v) >= 1e4 || (std::fabs(v) < 1e-2 && v != 0)) return fmt::format("{:.3g}", v);
  return fmt::format("{:g}", std::round(v * 1000) / 1000);
}

}  // namespace

std::string RenderSvgPlot(const std::string& title, const std::string& x_label,
                          const std::vector<PlotPanel>& panels) {
  size_t legend_entries = 0;
  for (const PlotPanel& p : panels) legend_entries = std::max(legend_entries, p.series.size());
  const double width = std::max<double>(1, panels.size()) * kPanelW;
  const double height = 24 + kPanelH + 8 + kLegendRow * legend_entries + 8;
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"18\" text-anchor=\"middle\" font-size=\"14\">{3}</text>\n",
      width, height, width / 2, Escape(title));
  for (size_t pi = 0; pi < panels.size(); ++pi) {
    const PlotPanel& panel = panels[pi];
    double x_min = std::numeric_limits<double>::infinity(), x_max = -x_min, y_max = 0;
    for (const PlotSeries& s : panel.series)
      for (const auto& [x, y] : s.points) {
        if (!std::isfinite(x) || !std::isfinite(y)) continue;
        x_min = std::min(x_min, x);
        x_max = std::max(x_max, x);
        y_max = std::max(y_max, y);
      }
    if (!std::isfinite(x_min)) x_min = 0, x_max = 1;
    if (x_max == x_min) x_min -= 1, x_max += 1;
    const double y_step = NiceStep(y_max > 0 ? y_max : 1, 5);
    const double y_top = std::max(y_step, std::ceil(y_max / y_step) * y_step);
    const double ox = pi * kPanelW + kMarginL, oy = 24 + kPanelH - kMarginB;
    const double w = kPanelW - kMarginL - kMarginR, h = kPanelH - kMarginT - kMarginB + 24;
    auto px = [&](double x) { return ox + (x - x_min) / (x_max - x_min) * w; };
    auto py = [&](double y) { return oy - y / y_top * h; };
    out +=
        fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"13\">{}</text>\n",
                    ox + w / 2, oy - h - 8, Escape(panel.title));
    out += fmt::format("<path d=\"M{0} {1}V{2}H{3}\" stroke=\"black\" fill=\"none\"/>\n", ox,
                       oy - h, oy, ox + w);
    for (double y = 0; y <= y_top + y_step / 2; y += y_step) {
      out += fmt::format(
          "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#ddd\"/>"
          "<text x=\"{3}\" y=\"{4}\" text-anchor=\"end\">{5}</text>\n",
          ox, py(y), ox + w, ox - 4, py(y) + 4, Num(y));
    }
    // x ticks at the distinct x values (bench parameters are few and discrete).
    std::vector<double> xs;
    for (const PlotSeries& s : panel.series)
      for (const auto& pt : s.points)
        if (std::isfinite(pt.first)) xs.push_back(pt.first);
    std::sort(xs.begin(), xs.end());
    xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
    for (const double x : xs)
      out += fmt::format(
          "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>"
          "<text x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
          px(x), oy, oy + 4, oy + 16, Num(x));
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", ox + w / 2,
                       oy + 32, Escape(x_label));
    out += fmt::format(
        "<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" transform=\"rotate(-90 {0} {1})\">{2}"
        "</text>\n",
        ox - 48, oy - h / 2, Escape(panel.y_label));
    for (size_t si = 0; si < panel.series.size(); ++si) {
      std::vector<std::pair<double, double>> pts;
      for (const auto& pt : panel.series[si].points)
        if (std::isfinite(pt.first) && std::isfinite(pt.second)) pts.push_back(pt);
      std::sort(pts.begin(), pts.end());
      if (pts.empty()) continue;
      const char* colour = kColours[si % std::size(kColours)];
      std::string d;
      for (size_t k = 0; k < pts.size(); ++k)
        d += fmt::format("{}{:.1f} {:.1f}", k ? " L" : "M", px(pts[k].first), py(pts[k].second));
      out += fmt::format("<path d=\"{}\" stroke=\"{}\" stroke-width=\"2\" fill=\"none\"/>\n", d,
                         colour);
      for (const auto& [x, y] : pts)
        out += fmt::format(
            "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>{}: {}</title>"
            "</circle>\n",
            px(x), py(y), colour, Escape(panel.series[si].label), Num(y));
    }
  }
  // Legend: the first panel's series names (every panel has the same series).
  const std::vector<PlotSeries>* names = nullptr;
  for (const PlotPanel& p : panels)
    if (p.series.size() == legend_entries) names = &p.series;
  for (size_t si = 0; names && si < names->size(); ++si) {
    const double y = 24 + kPanelH + 8 + kLegendRow * si + 12;
    out += fmt::format(
        "<line x1=\"16\" y1=\"{0}\" x2=\"40\" y2=\"{0}\" stroke=\"{1}\" stroke-width=\"2\"/>"
        "<text x=\"46\" y=\"{2}\">{3}</text>\n",
        y - 4, kColours[si % std::size(kColours)], y, Escape((*names)[si].label));
  }
  return out + "</svg>\n";
}

}  // namespace needle::report
