// Plasticity of the inelastic thin shells (gingold2004 section 3.3; notes
// ../shared/specs/gingold2004.md section 5): von Mises yield of the elastic strain with
// linear kinematic hardening, per face, averaged through the thickness, in the consistent
// form the notes derive (the printed update is dimensionally inconsistent and misses a
// normalization):
//
// Strains of a face (2x2 in its rest frame): total membrane E_m and bending E_c (1/m),
// plastic P_m, P_c; elastic eps(z) = (E_m - P_m) + z (E_c - P_c) at height z in [-h/2, h/2].
// Plane stress acts on the elastic strain (eps_33 = -nu / (1 - nu) tr eps) and the plastic
// strain is traceless in 3-D (p_33 = -tr P), so the in-plane block of the 3-D relative
// stress direction xi = dev(eps) - gamma p is
//   A = eps - a tr(eps) I - gamma P,   a = (1 - 2 nu) / (3 (1 - nu)),
// its 33 entry -tr A, and |xi|^2 = N(A) = tr A^2 + (tr A)^2. A is linear in z, so the
// root mean square of |xi| through the thickness is
//   F = sqrt(N(A_m) + h^2 / 12 N(A_c))                                         [1]
// and the face yields when Phi = F - eps0 > 0 (eps0 the dimensionless yield strain). The
// return (radial, the same multiplier at every z as the paper's "averaged along the
// normal"):
//   P_i += Phi / (1 + gamma) A_i / F,   i = m, c,
// and, since eps_33 depends on P, one pass does not land on the yield surface (Phi shrinks
// about 7x per pass): the passes repeat until Phi <= 1e-12 eps0 (at most 50).
// Closed forms (tests): uniaxial stress yields at eps = sqrt(3/2) eps0 / (1 + nu); in pure
// shear (tr = 0, no plane-stress coupling) the plastic strain grows at 1 / (1 + gamma) of
// the total, the elastic at gamma / (1 + gamma), and reverse yield follows a change of the
// deviatoric strain norm of 2 eps0 (the Bauschinger offset); gamma = 0 is ideal plasticity.
//
// [ours] Saturating kinematic hardening. The back strain gamma P above grows without bound:
// once gamma |P| passes eps0, a face whose load is taken off is outside the yield surface
// on the reverse side and flows back until gamma |P| = eps0. A crushed can (fold strains
// 0.16 at eps0 = 0.003, gamma = 0.05) springs back that way: its faces' largest plastic strain
// fell from 0.16 to 0.07 (~eps0 / gamma) as the plate lifted. Metals' back stress saturates
// (Armstrong-Frederick); with a limit L > 0 the back strain is the gradient of the convex
// potential psi(s) = (L^2 / gamma) log cosh(gamma s / L) of the RMS plastic strain
// s = sqrt(N(P_m) + h^2 / 12 N(P_c)):
//   back_i = g(s) P_i,   g(s) = L tanh(gamma s / L) / s   (-> gamma as s -> 0),
// the same factor through the thickness (P's RMS, like F), |back| < L always, and the return
// uses the tangent slope gamma sech^2(gamma s / L) in place of gamma. With L < eps0 an
// unloaded face never yields back. In pure shear the yield condition reads
// |E| - |P| - L tanh(gamma |P| / L) = eps0 (norms sqrt N), the linear law's as L -> inf.
#pragma once

#include <Eigen/Core>
#include <functional>

namespace shellsim::inelastic_shell {

struct YieldParams {
  double yieldStrain = 0;     // eps0, 1
  double hardening = 0;       // gamma = h_kin / (2 mu), 1
  double hardeningLimit = 0;  // L > 0: the back strain saturates at norm L; 0: linear, 1
  double poisson = 0;         // nu
  double thickness = 0;       // h, m
};

// F of the header for elastic strains (em, ec) and plastic strains (pm, pc).
double yieldNorm(const Eigen::Matrix2d& em, const Eigen::Matrix2d& ec, const Eigen::Matrix2d& pm,
                 const Eigen::Matrix2d& pc, const YieldParams& params);

// The return mapping for total strains (totalM, totalC): updates the plastic strains
// (pm, pc) in place; `projectBending`, if set, maps pc onto what the face can hold after
// every pass (a face with a boundary edge has no plastic curvature across it). Returns the
// number of passes, 0 when the face is inside the yield surface.
int returnMap(const Eigen::Matrix2d& totalM, const Eigen::Matrix2d& totalC, Eigen::Matrix2d& pm,
              Eigen::Matrix2d& pc, const YieldParams& params,
              const std::function<void(Eigen::Matrix2d&)>& projectBending = {});

}  // namespace shellsim::inelastic_shell
