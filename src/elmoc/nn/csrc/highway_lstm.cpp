// Time loops of one highway LSTM layer (He et al. 2017; elmoc/nn/alternating_lstm.py) for CPU tensors.
//
// The math is that of HighwayLstmLayer's Python loop; this file moves the per-step work out
// of Python.  A forward step is one matrix product (the recurrent gates), one sigmoid over
// all five gate blocks (tanh z = 2 sigmoid(2z) - 1, with the candidate block pre-scaled by 2),
// one sigmoid for tanh(c) and two fused C++ loops for the cell update, the highway mix,
// dropout and masking.  A backward step is one fused loop for every gate derivative and one
// matrix product for the carried state's gradient; the recurrent weight and bias gradients are
// single products / sums over all steps after the loop.
//
// Conventions (time-major, contiguous):
//   projected (T, B, 6H)  x W_in^T: five gate blocks i, f, o, r, g, then the highway input W_x x
//   mask      (T, B)      bool; a False step leaves (h, c) unchanged and outputs 0
//   dropout   (B, H)      recurrent dropout mask (already divided by keep), or none
//   weight    (5H, H), bias (5H): the recurrent linear map
// Forward returns acts (T, B, 5H) = activated i, f, o, r and tanh(g); out (T, B, H);
// c_all (T+1, B, H) carried cells; hd_all (T+1, B, H) carried states times the dropout mask
// (the inputs of the recurrent products); tanh_c (T, B, H).
#include "time_loops.h"

namespace {

template <typename scalar_t>
void forward_loop(const at::Tensor& projected, const at::Tensor& mask, const scalar_t* drop, const at::Tensor& ws_t,
                  at::Tensor& acts, at::Tensor& out, at::Tensor& c_all, at::Tensor& hd_all, at::Tensor& tanh_c) {
  const int64_t T = acts.size(0), B = acts.size(1), H5 = acts.size(2), H = H5 / 5, H6 = 6 * H;
  const bool* mk = mask.data_ptr<bool>();
  const scalar_t* P = projected.data_ptr<scalar_t>();
  scalar_t* A = acts.data_ptr<scalar_t>();
  scalar_t* O = out.data_ptr<scalar_t>();
  scalar_t* CA = c_all.data_ptr<scalar_t>();
  scalar_t* HD = hd_all.data_ptr<scalar_t>();
  scalar_t* TC = tanh_c.data_ptr<scalar_t>();
  const scalar_t no_clip = std::numeric_limits<scalar_t>::infinity();
  for (int64_t t = 0; t < T; ++t) {
    at::Tensor a = acts.select(0, t);  // holds the input gates + bias of step t on entry
    if (t > 0) a.addmm_(hd_all.select(0, t), ws_t);  // h_0 = 0: no recurrent product at the first step
    a.sigmoid_();
    scalar_t* at_ = A + t * B * H5;
    const scalar_t* c_prev = CA + t * B * H;
    scalar_t* c_new = CA + (t + 1) * B * H;
    scalar_t* tc = TC + t * B * H;
    for_rows(B, H5, [&](int64_t b) {
      scalar_t* row = at_ + b * H5;  // i, f, o, r, g
      cell_update_row(row, row + H, row + 4 * H, c_prev + b * H, c_new + b * H, tc + b * H, H, no_clip);
    });
    tanh_c.select(0, t).sigmoid_();
    const scalar_t* hd_prev = HD + t * B * H;
    scalar_t* hd_new = HD + (t + 1) * B * H;
    scalar_t* ot = O + t * B * H;
    for_rows(B, 4 * H, [&](int64_t b) {
      const scalar_t* o = at_ + b * H5 + 2 * H;
      const scalar_t* r = o + H;
      const scalar_t* hw = P + (t * B + b) * H6 + 5 * H;
      scalar_t* tr = tc + b * H;
      scalar_t* orow = ot + b * H;
      scalar_t* hn = hd_new + b * H;
      if (!mk[t * B + b]) {  // masked step: carry the previous state, output 0
        std::fill(orow, orow + H, scalar_t(0));
        std::copy(hd_prev + b * H, hd_prev + (b + 1) * H, hn);
        std::copy(c_prev + b * H, c_prev + (b + 1) * H, c_new + b * H);
        return;
      }
      const scalar_t* dr = drop ? drop + b * H : nullptr;
      ELMOC_IVDEP
      for (int64_t k = 0; k < H; ++k) {
        const scalar_t th = 2 * tr[k] - 1;
        tr[k] = th;
        const scalar_t h = r[k] * (o[k] * th) + (1 - r[k]) * hw[k];
        orow[k] = h;
        hn[k] = dr ? h * dr[k] : h;
      }
    });
  }
}

std::vector<at::Tensor> highway_forward(const at::Tensor& projected_in, const at::Tensor& mask_in,
                                        const std::optional<at::Tensor>& dropout, const at::Tensor& weight,
                                        const at::Tensor& bias) {
  TORCH_CHECK(projected_in.device().is_cpu(), "elmoc highway LSTM: CPU tensors only");
  TORCH_CHECK(projected_in.dim() == 3 && projected_in.size(2) % 6 == 0, "projected must be (T, B, 6H)");
  const at::Tensor projected = projected_in.contiguous();
  const at::Tensor mask = mask_in.to(at::kBool).contiguous();
  const int64_t T = projected.size(0), B = projected.size(1), H = projected.size(2) / 6;
  TORCH_CHECK(mask.size(0) == T && mask.size(1) == B, "mask must be (T, B)");
  TORCH_CHECK(weight.size(0) == 5 * H && weight.size(1) == H, "weight must be (5H, H)");
  // Candidate block (the fifth) doubled: one sigmoid serves all gates, tanh z = 2 sigmoid(2z) - 1.
  at::Tensor scale = at::ones({5 * H}, projected.options());
  scale.narrow(0, 4 * H, H).fill_(2);
  at::Tensor ws_t = (weight * scale.unsqueeze(1)).t();  // (H, 5H), a view MKL reads in place
  at::Tensor acts = at::empty({T, B, 5 * H}, projected.options());
  const at::Tensor bias_c = bias.contiguous();
  AT_DISPATCH_FLOATING_TYPES(projected.scalar_type(), "elmoc_highway_gates", [&] {
    // acts = (input gates + bias) * scale, in one pass
    const scalar_t* src = projected.data_ptr<scalar_t>();
    const scalar_t* bs = bias_c.data_ptr<scalar_t>();
    scalar_t* dst = acts.data_ptr<scalar_t>();
    const int64_t H5 = 5 * H, H4 = 4 * H;
    for_rows(T * B, H5, [&](int64_t row) {
      const scalar_t* in = src + row * 6 * H;
      scalar_t* out = dst + row * H5;
      ELMOC_IVDEP
      for (int64_t k = 0; k < H4; ++k) out[k] = in[k] + bs[k];
      ELMOC_IVDEP
      for (int64_t k = H4; k < H5; ++k) out[k] = 2 * (in[k] + bs[k]);
    });
  });
  at::Tensor dm;
  if (dropout.has_value() && dropout->defined()) dm = dropout->contiguous();
  auto opts = projected.options();
  at::Tensor out = at::empty({T, B, H}, opts);
  at::Tensor c_all = at::empty({T + 1, B, H}, opts);
  at::Tensor hd_all = at::empty({T + 1, B, H}, opts);
  at::Tensor tanh_c = at::empty({T, B, H}, opts);
  c_all.select(0, 0).zero_();
  hd_all.select(0, 0).zero_();
  AT_DISPATCH_FLOATING_TYPES(projected.scalar_type(), "elmoc_highway_forward", [&] {
    forward_loop<scalar_t>(projected, mask, dm.defined() ? dm.data_ptr<scalar_t>() : nullptr, ws_t, acts, out,
                           c_all, hd_all, tanh_c);
  });
  return {acts, out, c_all, hd_all, tanh_c};
}

template <typename scalar_t>
void backward_loop(const at::Tensor& grad_out, const at::Tensor& projected, const at::Tensor& mask,
                   const at::Tensor& acts, const at::Tensor& c_all, const at::Tensor& tanh_c, const scalar_t* drop,
                   const at::Tensor& weight, at::Tensor& dproj) {
  const int64_t T = acts.size(0), B = acts.size(1), H5 = acts.size(2), H = H5 / 5, H6 = 6 * H;
  const bool* mk = mask.data_ptr<bool>();
  const scalar_t* GO = grad_out.data_ptr<scalar_t>();
  const scalar_t* P = projected.data_ptr<scalar_t>();
  const scalar_t* A = acts.data_ptr<scalar_t>();
  const scalar_t* CA = c_all.data_ptr<scalar_t>();
  const scalar_t* TC = tanh_c.data_ptr<scalar_t>();
  scalar_t* DP = dproj.data_ptr<scalar_t>();
  auto opts = acts.options();
  at::Tensor dh = at::zeros({B, H}, opts);  // gradient of the carried state h (undropped)
  at::Tensor dc = at::zeros({B, H}, opts);
  at::Tensor dh_next = at::empty({B, H}, opts);
  scalar_t* DC = dc.data_ptr<scalar_t>();
  for (int64_t t = T - 1; t >= 0; --t) {
    const scalar_t* DH = dh.data_ptr<scalar_t>();
    for_rows(B, 8 * H, [&](int64_t b) {
      scalar_t* dz = DP + (t * B + b) * H6;
      if (!mk[t * B + b]) {  // masked step: dh and dc pass through, the gates get nothing
        std::fill(dz, dz + H6, scalar_t(0));
        return;
      }
      const scalar_t* __restrict__ i = A + (t * B + b) * H5;
      const scalar_t* __restrict__ f = i + H;
      const scalar_t* __restrict__ o = i + 2 * H;
      const scalar_t* __restrict__ r = i + 3 * H;
      const scalar_t* __restrict__ g = i + 4 * H;
      const scalar_t* __restrict__ th = TC + (t * B + b) * H;
      const scalar_t* __restrict__ cp = CA + (t * B + b) * H;
      const scalar_t* __restrict__ hw = P + (t * B + b) * H6 + 5 * H;
      const scalar_t* __restrict__ go = GO + (t * B + b) * H;
      const scalar_t* __restrict__ dhr = DH + b * H;
      scalar_t* __restrict__ dcr = DC + b * H;
      scalar_t* __restrict__ dzi = dz;
      scalar_t* __restrict__ dzf = dz + H;
      scalar_t* __restrict__ dzo = dz + 2 * H;
      scalar_t* __restrict__ dzr = dz + 3 * H;
      scalar_t* __restrict__ dzg = dz + 4 * H;
      scalar_t* __restrict__ dhw = dz + 5 * H;
      ELMOC_IVDEP
      for (int64_t k = 0; k < H; ++k) {
        const scalar_t dn = go[k] + dhr[k];  // gradient of this step's h
        const scalar_t oth = o[k] * th[k];
        const scalar_t dcn = dcr[k] + dn * r[k] * o[k] * (1 - th[k] * th[k]);
        dzi[k] = dcn * g[k] * i[k] * (1 - i[k]);
        dzf[k] = dcn * cp[k] * f[k] * (1 - f[k]);
        dzo[k] = dn * r[k] * th[k] * o[k] * (1 - o[k]);
        dzr[k] = dn * (oth - hw[k]) * r[k] * (1 - r[k]);
        dzg[k] = dcn * i[k] * (1 - g[k] * g[k]);
        dhw[k] = dn * (1 - r[k]);
        dcr[k] = dcn * f[k];
      }
    });
    if (t == 0) break;  // h_0 = 0 is no input: its gradient is not needed
    at::mm_out(dh_next, dproj.select(0, t).narrow(1, 0, H5), weight);  // (B, H) gradient of h_{t-1} * drop
    scalar_t* DHN = dh_next.data_ptr<scalar_t>();
    for (int64_t b = 0; b < B; ++b) {
      if (!mk[t * B + b]) {
        std::copy(DH + b * H, DH + (b + 1) * H, DHN + b * H);
      } else if (drop) {
        const scalar_t* dr = drop + b * H;
        scalar_t* row = DHN + b * H;
        ELMOC_IVDEP
        for (int64_t k = 0; k < H; ++k) row[k] *= dr[k];
      }
    }
    std::swap(dh, dh_next);
  }
}

std::vector<at::Tensor> highway_backward(const at::Tensor& grad_out_in, const at::Tensor& projected_in,
                                         const at::Tensor& mask_in, const at::Tensor& acts, const at::Tensor& c_all,
                                         const at::Tensor& hd_all, const at::Tensor& tanh_c,
                                         const std::optional<at::Tensor>& dropout, const at::Tensor& weight_in) {
  const at::Tensor grad_out = grad_out_in.contiguous();
  const at::Tensor projected = projected_in.contiguous();
  const at::Tensor mask = mask_in.to(at::kBool).contiguous();
  const at::Tensor weight = weight_in.contiguous();
  const int64_t T = acts.size(0), B = acts.size(1), H5 = acts.size(2), H = H5 / 5;
  at::Tensor dm;
  if (dropout.has_value() && dropout->defined()) dm = dropout->contiguous();
  at::Tensor dproj = at::empty({T, B, 6 * H}, acts.options());
  AT_DISPATCH_FLOATING_TYPES(acts.scalar_type(), "elmoc_highway_backward", [&] {
    backward_loop<scalar_t>(grad_out, projected, mask, acts, c_all, tanh_c,
                            dm.defined() ? dm.data_ptr<scalar_t>() : nullptr, weight, dproj);
  });
  // Recurrent weight and bias gradients: one product and one sum over all steps (the weight's
  // from step 1 on: the state entering step 0 is zero).
  at::Tensor dz = dproj.view({T * B, 6 * H}).narrow(1, 0, H5);
  at::Tensor d_weight = T > 1 ? at::mm(hd_all.narrow(0, 1, T - 1).reshape({(T - 1) * B, H}).t(), dz.narrow(0, B, (T - 1) * B)).t()
                              : at::zeros({H5, H}, acts.options());
  at::Tensor d_bias = dz.sum(0);
  return {dproj, d_weight, d_bias};
}

}  // namespace

TORCH_LIBRARY(elmoc_highway, m) {
  m.def("highway_forward(Tensor projected, Tensor mask, Tensor? dropout, Tensor weight, Tensor bias) -> Tensor[]",
        &highway_forward);
  m.def("highway_backward", &highway_backward);
}
