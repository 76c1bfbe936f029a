// Weight views over a .cact file (weights.h).
#include "model/weights.h"

#include <cmath>

#include "base/error.h"
#include "kernels/ops.h"

namespace needle::model {

namespace {

// Ternary level magnitude (times 1/sqrt(group)); not stored in the file (FORMAT.md).
constexpr double kTernaryLevel = 1.2240064;

std::vector<float> Floats(const format::CactFile& f, const std::string& name, uint64_t expect) {
  const format::TensorInfo& t = f.tensor(name);
  std::vector<float> v = f.floats(t);
  if (v.size() != expect)
    Fail<FormatError>("{}: tensor '{}' has {} values, expected {}", f.path(), name, v.size(),
                      expect);
  return v;
}

kernels::CqMatrix Matrix(const format::CactFile& f, const std::string& name, uint64_t rows,
                         uint64_t cols) {
  const format::TensorInfo& t = f.tensor(name);
  if (t.rows() != rows || t.cols() != cols)
    Fail<FormatError>("{}: tensor '{}' has shape {}, expected [{}, {}]", f.path(), name,
                      t.shape_str(), rows, cols);
  return CqMatrixOf(f, t);
}

}  // namespace

kernels::CqMatrix CqMatrixOf(const format::CactFile& file, const format::TensorInfo& t) {
  if (t.dtype != format::DType::kCQ)
    Fail<FormatError>("{}: tensor '{}' is {}; only CQ matrices are supported for compute",
                      file.path(), t.name, format::DTypeName(t.dtype));
  const format::CqView v = file.cq(t);
  kernels::CqMatrix m;
  m.rows = v.rows;
  m.cols = v.cols;
  m.group = v.group;
  m.in_pad = v.in_pad;
  m.groups_per_row = v.groups_per_row;
  m.row_bytes = v.row_bytes;
  m.code_bits = format::CodeBits(v.record_bits);
  m.codes = v.codes;
  m.norms = v.norms;
  if (v.record_bits == format::kTernaryBits) {
    m.ternary = true;
    const float c = static_cast<float>(kTernaryLevel / std::sqrt(static_cast<double>(v.group)));
    m.levels[3] = -c;  // crumb 3 = trit 0
    m.levels[0] = 0.f;
    m.levels[1] = c;
    m.levels[2] = 0.f;  // unused crumb
  } else {
    const auto cb = file.codebook(v.record_bits);
    for (size_t i = 0; i < cb.size(); ++i) m.levels[i] = cb[i];
  }
  return m;
}

kernels::CqMatrix CqTableRows::Row(size_t r, std::span<uint8_t> buf) const {
  const size_t norm_bytes = 2 * m.groups_per_row;
  if (r >= m.rows || buf.size() < row_bytes())
    throw Error(ErrorKind::kInternal,
                fmt::format("CqTableRows::Row: row {} of {} into {} bytes", r, m.rows, buf.size()));
  file->ReadAt(m.codes + r * m.row_bytes, buf.first(m.row_bytes));
  file->ReadAt(m.norms + r * norm_bytes, buf.subspan(m.row_bytes, norm_bytes));
  kernels::CqMatrix row = m;
  row.rows = 1;
  row.codes = buf.data();
  row.norms = buf.data() + m.row_bytes;
  return row;
}

Weights LoadWeights(const format::CactFile& f) {
  const format::Geometry& g = f.geometry();
  const uint64_t d = g.d_model, n = g.lanes, L = g.num_layers;
  Weights w;
  w.embedding = Matrix(f, "embedding", g.vocab, d);
  for (uint32_t i = 0; i < g.num_layers; ++i) {
    const std::string p = format::LayerPrefix(i) + ".";
    LayerWeights lw;
    lw.norm_in = Floats(f, p + "norm_in", d);
    lw.q_proj = Matrix(f, p + "q_proj", g.attn_dim(), d);
    lw.k_proj = Matrix(f, p + "k_proj", g.kv_dim(), d);
    lw.v_proj = Matrix(f, p + "v_proj", g.kv_dim(), d);
    lw.q_norm = Floats(f, p + "q_norm", g.head_dim);
    lw.k_norm = Floats(f, p + "k_norm", g.head_dim);
    lw.gate_proj = Matrix(f, p + "gate_proj", g.attn_dim(), d);
    lw.out_proj = Matrix(f, p + "out_proj", d, g.attn_dim());
    lw.post_norm = Floats(f, p + "post_norm", d);
    lw.attn_gate = Floats(f, p + "attn_gate", 1)[0];
    lw.pre_hada = Floats(f, p + "pre_hada", d);
    lw.d1 = Floats(f, p + "d1", g.hada_n);
    lw.d2 = Floats(f, p + "d2", g.hada_n);
    lw.d3 = Floats(f, p + "d3", g.hada_n);
    w.layers.push_back(std::move(lw));
  }
  w.a_pre = Floats(f, "mhc_a_pre", L);
  w.a_post = Floats(f, "mhc_a_post", L);
  w.a_res = Floats(f, "mhc_a_res", L);
  w.b_pre = Floats(f, "mhc_b_pre", L * n);
  w.b_post = Floats(f, "mhc_b_post", L * n);
  w.b_res = Floats(f, "mhc_b_res", L * n * n);
  w.phi_pre = Matrix(f, "mhc_phi_pre", L * n, n * d);
  w.phi_post = Matrix(f, "mhc_phi_post", L * n, n * d);
  w.phi_res = Matrix(f, "mhc_phi_res", L * n * n, n * d);
  for (size_t s = 0; s < g.engram_sites.size(); ++s) {
    const std::string p = fmt::format("engram{}.", s);
    EngramWeights ew;
    ew.layer = g.engram_sites[s];
    ew.tables.file = &f;
    ew.tables.m =
        Matrix(f, p + "tables", uint64_t{g.num_engram_tables} * g.engram_slots, g.engram_sub_dim);
    f.Evict(f.tensor(p + "tables"));  // read a row at a time (CqTableRows)
    ew.key_proj = Matrix(f, p + "key_proj", d, g.engram_dim());
    ew.value_proj = Matrix(f, p + "value_proj", d, g.engram_dim());
    ew.taps = Floats(f, p + "taps", uint64_t{g.engram_conv_taps} * d);
    w.engram.push_back(std::move(ew));
  }
  w.final_norm = Floats(f, "final_norm", d);
  for (const format::HeadInfo& h : f.heads()) {
    HeadWeights hw;
    hw.kind = h.kind;
    hw.num_probes = h.num_probes;
    hw.out_dim = h.out_dim;
    hw.probes = f.floats(f.tensors()[h.probes]);
    hw.proj = f.float_view(f.tensors()[h.proj]);
    f.Evict(f.tensors()[h.proj]);  // not read until the head is asked
    hw.bias = f.floats(f.tensors()[h.bias]);
    if (hw.probes.size() != uint64_t{h.num_probes} * d ||
        hw.proj.size != uint64_t{h.out_dim} * h.num_probes * d || hw.bias.size() != h.out_dim)
      Fail<FormatError>("{}: probe head {} has inconsistent shapes", f.path(),
                        format::HeadName(h.kind));
    w.heads.push_back(std::move(hw));
  }
  return w;
}

uint64_t WeightBytesPerToken(const Weights& w, bool int8_phi) {
  auto cq = [](const kernels::CqMatrix& m) -> uint64_t {
    return m.rows * (m.row_bytes + m.groups_per_row * 2);
  };
  uint64_t bytes = cq(w.embedding);
  for (const LayerWeights& l : w.layers)
    bytes += cq(l.q_proj) + cq(l.k_proj) + cq(l.v_proj) + cq(l.gate_proj) + cq(l.out_proj);
  for (const EngramWeights& e : w.engram) bytes += cq(e.key_proj) + cq(e.value_proj);
  for (const kernels::CqMatrix* m : {&w.phi_pre, &w.phi_post, &w.phi_res})
    bytes += int8_phi ? m->rows * (m->cols + 4) : cq(*m);
  return bytes;
}

uint64_t CqMacsPerToken(const Weights& w, bool int8_phi) {
  auto cq = [](const kernels::CqMatrix& m) -> uint64_t { return uint64_t{m.rows} * m.in_pad; };
  uint64_t macs = cq(w.embedding);
  for (const LayerWeights& l : w.layers)
    macs += cq(l.q_proj) + cq(l.k_proj) + cq(l.v_proj) + cq(l.gate_proj) + cq(l.out_proj);
  for (const EngramWeights& e : w.engram) macs += cq(e.key_proj) + cq(e.value_proj);
  for (const kernels::CqMatrix* m : {&w.phi_pre, &w.phi_post, &w.phi_res})
    macs += int8_phi ? uint64_t{m->rows} * m->cols : cq(*m);
  return macs;
}

}  // namespace needle::model
