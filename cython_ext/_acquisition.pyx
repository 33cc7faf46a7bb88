# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The adaptive acquisition's expected gain of every unit for every row (methods.acquisition's ``gains``), without
the GIL, rows spread over threads.

With p a row's class probabilities and T[u, c, a] the probability of outcome a of unit u in a row of class c, the
joint J[c, a] = p[c] T[u, c, a] and:
- accuracy: sum_a max_c J[c, a] - max_c p[c];
- entropy: sum_{c, a: J[c, a] > 0} J[c, a] log(J[c, a] / (p[c] sum_c' J[c', a])), the mutual information of the
  unit's outcome and the class.
Sums run in index order (outcomes, then classes within one). A gain below ``tolerance`` is 0. The caller
(AdaptiveAcquisitionClassifier.gains) checks the shapes; probabilities are finite and in [0, 1].
"""

from cython.parallel cimport prange
from libc.math cimport log

from _typedefs cimport float64


def gains(const float64[:, ::1] proba, const float64[:, :, ::1] tables, float64[:, ::1] out, bint entropy,
          float64 tolerance, int n_threads):
    """Fill out[r, u] with unit u's gain for row r (see the module)."""
    cdef Py_ssize_t n = proba.shape[0], num_units = tables.shape[0], num_class = tables.shape[1]
    cdef Py_ssize_t num_outcomes = tables.shape[2], r, u, c, a
    cdef float64 top, total, best, joint, outcome, gain
    for r in prange(n, nogil=True, num_threads=n_threads, schedule="static"):
        top = proba[r, 0]
        for c in range(1, num_class):
            if proba[r, c] > top:
                top = proba[r, c]
        for u in range(num_units):
            total = 0.0
            for a in range(num_outcomes):
                if entropy:
                    outcome = 0.0
                    for c in range(num_class):
                        outcome = outcome + proba[r, c] * tables[u, c, a]
                    for c in range(num_class):
                        joint = proba[r, c] * tables[u, c, a]
                        if joint > 0:
                            total = total + joint * log(joint / (proba[r, c] * outcome))
                else:
                    best = proba[r, 0] * tables[u, 0, a]
                    for c in range(1, num_class):
                        joint = proba[r, c] * tables[u, c, a]
                        if joint > best:
                            best = joint
                    total = total + best
            gain = total if entropy else total - top
            out[r, u] = 0.0 if gain < tolerance else gain
