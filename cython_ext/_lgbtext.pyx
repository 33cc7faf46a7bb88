# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The trees of a LightGBM model text read in one compiled pass, for ``io.lightgbm_text.read_text``.

``trees(data, start)`` reads the tree blocks as LightGBM 4.7.0 writes them (``Tree::ToString``) into the Forest's
concatenated arrays. It declines (returns None) anything else, and ``read_text`` then reads the text with its Python
reader, which refuses it with its error or reads it: a linear tree, a key LightGBM does not write, a repeated key, more
than 22 lines in a tree, a number outside the plain decimal forms LightGBM writes (``[-]digits`` for an integer of at
most 18 digits, ``[-]digits[.digits][e[+-]digits]`` for a float: no ``inf``, ``nan``, ``+``, ``_`` or other white space
than single spaces; ``inf`` and ``-inf`` are read), a count that does not match, a value out of range (num_leaves < 1, num_cat < 0, a decision type
outside 0-255, cat_boundaries that do not rise from 0, a category word outside 32 bits), a carriage return, a text
ending inside a tree. What it reads, it reads as the Python reader does, to the bit (C's ``strtod`` and Python's float
both round correctly; tested on random models): the fields a tree lacks are None for the whole forest as there.
"""

import numpy as np

cimport numpy as cnp
from libc.math cimport INFINITY
from libc.stdint cimport int64_t
from libc.stdlib cimport free, realloc, strtod
from libc.string cimport memcmp

cnp.import_array()

DEF MAX_TREE_LINES = 22
DEF MAX_TOKEN = 511

# the keys of a tree block, in the order of the field table below
cdef tuple KEYS = (b"num_leaves", b"num_cat", b"split_feature", b"split_gain", b"threshold", b"decision_type",
                   b"left_child", b"right_child", b"leaf_value", b"leaf_weight", b"leaf_count", b"internal_value",
                   b"internal_weight", b"internal_count", b"cat_boundaries", b"cat_threshold", b"is_linear",
                   b"shrinkage")
cdef enum:
    NUM_LEAVES, NUM_CAT, SPLIT_FEATURE, SPLIT_GAIN, THRESHOLD, DECISION_TYPE, LEFT_CHILD, RIGHT_CHILD, LEAF_VALUE,
    LEAF_WEIGHT, LEAF_COUNT, INTERNAL_VALUE, INTERNAL_WEIGHT, INTERNAL_COUNT, CAT_BOUNDARIES, CAT_THRESHOLD,
    IS_LINEAR, SHRINKAGE, NUM_KEYS


cdef class _Column:
    """A growing array of doubles or int64s."""
    cdef double *f
    cdef int64_t *i
    cdef Py_ssize_t size, capacity
    cdef bint ints

    def __cinit__(self, bint ints):
        self.ints = ints
        self.f = NULL
        self.i = NULL
        self.size = 0
        self.capacity = 0

    def __dealloc__(self):
        free(self.f)
        free(self.i)

    cdef int reserve(self, Py_ssize_t more) except -1:
        cdef Py_ssize_t want = self.size + more
        cdef void *grown
        if want <= self.capacity:
            return 0
        want = max(want, 2 * self.capacity, 1024)
        if self.ints:
            grown = realloc(self.i, want * sizeof(int64_t))
        else:
            grown = realloc(self.f, want * sizeof(double))
        if grown == NULL:
            raise MemoryError()
        if self.ints:
            self.i = <int64_t *>grown
        else:
            self.f = <double *>grown
        self.capacity = want
        return 0

    cdef object array(self):
        cdef cnp.ndarray out
        cdef Py_ssize_t k
        if self.ints:
            out = np.empty(self.size, dtype=np.int64)
            for k in range(self.size):
                (<int64_t *>cnp.PyArray_DATA(out))[k] = self.i[k]
        else:
            out = np.empty(self.size, dtype=np.float64)
            for k in range(self.size):
                (<double *>cnp.PyArray_DATA(out))[k] = self.f[k]
        return out


cdef inline bint _digit(char c) nogil:
    return c >= 48 and c <= 57


cdef inline Py_ssize_t _digits(const char *s, Py_ssize_t n, Py_ssize_t k) nogil:
    """The offset of the first character at or after k that is not a digit (n at the end)."""
    while k < n and _digit(s[k]):
        k += 1
    return k


cdef Py_ssize_t _int_token(const char *s, Py_ssize_t n, int64_t *out) nogil:
    """A token ``[-]digits`` (at most 18 digits) at s[0:n]: its length (stops at a space or n), -1 otherwise."""
    cdef Py_ssize_t k = 0, digits = 0
    cdef int64_t value = 0
    cdef bint negative = n > 0 and s[0] == 45
    if negative:
        k = 1
    while k < n and s[k] != 32:
        if not _digit(s[k]) or digits == 18:
            return -1
        value = value * 10 + (s[k] - 48)
        digits += 1
        k += 1
    if digits == 0:
        return -1
    out[0] = -value if negative else value
    return k


cdef Py_ssize_t _float_token(const char *s, Py_ssize_t n, double *out) nogil:
    """A token ``[-]digits[.digits][(e|E)[+-]digits]`` (at least one mantissa digit, at most MAX_TOKEN characters) or
    ``[-]inf`` at s[0:n]: its length (stops at a space or n), -1 otherwise; its value by ``strtod``."""
    cdef Py_ssize_t j, k = 0, mantissa
    cdef char buffer[MAX_TOKEN + 1]
    cdef char *end
    if k < n and s[k] == 45:
        k += 1
    if n - k >= 3 and s[k] == 105 and s[k + 1] == 110 and s[k + 2] == 102 and (n - k == 3 or s[k + 3] == 32):
        out[0] = -INFINITY if k else INFINITY  # "inf", "-inf": what LightGBM writes for an infinite threshold
        return k + 3
    j = _digits(s, n, k)
    mantissa, k = j - k, j
    if k < n and s[k] == 46:
        j = _digits(s, n, k + 1)
        mantissa, k = mantissa + j - k - 1, j
    if mantissa == 0:
        return -1
    if k < n and (s[k] == 101 or s[k] == 69):
        k += 1
        if k < n and (s[k] == 43 or s[k] == 45):
            k += 1
        j = _digits(s, n, k)
        if j == k:  # an exponent without digits
            return -1
        k = j
    if (k < n and s[k] != 32) or k > MAX_TOKEN:
        return -1
    for j in range(k):
        buffer[j] = s[j]
    buffer[k] = 0
    out[0] = strtod(buffer, &end)
    if end != buffer + k:
        return -1
    return k


cdef int _numbers(const char *s, Py_ssize_t n, Py_ssize_t count, _Column column) except -2:
    """Append the ``count`` numbers of the space-separated value s[0:n] to ``column``: 0, or -1 (declined: another
    count, another form)."""
    cdef Py_ssize_t k = 0, length, found = 0, before = column.size
    column.reserve(min(count, (n + 1) // 2))  # no more tokens than the value's text holds (a damaged count is huge)
    while True:
        while k < n and s[k] == 32:
            k += 1
        if k == n:
            break
        if found == count:
            column.size = before
            return -1
        if column.ints:
            length = _int_token(s + k, n - k, column.i + column.size)
        else:
            length = _float_token(s + k, n - k, column.f + column.size)
        if length < 0:
            column.size = before
            return -1
        column.size += 1
        found += 1
        k += length
    if found != count:
        column.size = before
        return -1
    return 0


cdef int _scalar(const char *s, Py_ssize_t n, int64_t *out):
    """One integer value s[0:n] (no spaces): 0, or -1."""
    return 0 if n > 0 and _int_token(s, n, out) == n else -1


def trees(bytes data, Py_ssize_t start):
    """The trees of LightGBM model text ``data`` from its first ``Tree=`` line at ``start``.

    Parameters
    ----------
    data : bytes
        The model text, encoded.
    start : int
        The offset of its first ``Tree=`` line (or of its ``end of trees`` line).

    Returns
    -------
    dict or None
        ``starts`` (each tree's offset, then the ``end of trees`` line's), ``num_leaves``, ``num_cat``,
        ``shrinkage`` (one per tree), and the concatenated fields (``split_feature`` ... ``cat_threshold``;
        ``cat_boundaries`` offset to index the concatenated ``cat_threshold``; a field some tree with nodes lacks:
        None); None where the text is not what LightGBM writes (see the module).
    """
    cdef const char *s = data
    cdef Py_ssize_t n = len(data), pos = start, nl, eq, lines, key, k, m, count
    cdef Py_ssize_t value_at[NUM_KEYS]
    cdef Py_ssize_t value_len[NUM_KEYS]
    cdef int64_t leaves, cats, linear, word, previous, cat_words = 0
    cdef double shrink
    cdef list keys = [k_ for k_ in KEYS]
    cdef bint ints
    cdef _Column column
    if start < 0 or start > n or data.find(b"\r", start) >= 0:
        return None
    int_keys = (SPLIT_FEATURE, DECISION_TYPE, LEFT_CHILD, RIGHT_CHILD, LEAF_COUNT, INTERNAL_COUNT, CAT_BOUNDARIES,
                CAT_THRESHOLD)
    columns = [_Column(i in int_keys) for i in range(NUM_KEYS)]
    missing = [False] * NUM_KEYS
    starts, num_leaves, num_cat, shrinkage = [], [], [], []
    while n - pos >= 5 and memcmp(s + pos, b"Tree=", 5) == 0:
        starts.append(pos)
        nl = data.find(b"\n", pos)
        if nl < 0:
            return None
        pos = nl + 1
        for key in range(NUM_KEYS):
            value_at[key] = -1
        lines = 0
        while pos < n and s[pos] != 10:
            if lines == MAX_TREE_LINES:
                return None
            nl = data.find(b"\n", pos)
            if nl < 0:
                return None
            eq = data.find(b"=", pos, nl)
            if eq < 0:
                return None
            for key in range(NUM_KEYS):
                if eq - pos == len(<bytes>keys[key]) and memcmp(s + pos, <const char *>(<bytes>keys[key]),
                                                                 eq - pos) == 0:
                    break
            else:
                return None
            if value_at[key] >= 0:
                return None
            value_at[key] = eq + 1
            value_len[key] = nl - eq - 1
            lines += 1
            pos = nl + 1
        if pos >= n:
            return None
        while pos < n and s[pos] == 10:
            pos += 1
        # the tree's scalars
        if value_at[NUM_LEAVES] < 0 or _scalar(s + value_at[NUM_LEAVES], value_len[NUM_LEAVES], &leaves) < 0 \
                or leaves < 1:
            return None
        if value_at[NUM_CAT] < 0 or _scalar(s + value_at[NUM_CAT], value_len[NUM_CAT], &cats) < 0 or cats < 0:
            return None
        if value_at[IS_LINEAR] >= 0 and (_scalar(s + value_at[IS_LINEAR], value_len[IS_LINEAR], &linear) < 0
                                         or linear != 0):
            return None
        shrink = 1.0
        if value_at[SHRINKAGE] >= 0 and \
                _float_token(s + value_at[SHRINKAGE], value_len[SHRINKAGE], &shrink) != value_len[SHRINKAGE]:
            return None
        m = leaves - 1
        # the node fields: required, optional (decision_type: numerical by default), none for a one-leaf tree
        if m > 0:
            for key in (SPLIT_FEATURE, THRESHOLD, LEFT_CHILD, RIGHT_CHILD, DECISION_TYPE, SPLIT_GAIN, INTERNAL_VALUE,
                        INTERNAL_WEIGHT, INTERNAL_COUNT):
                column = columns[key]
                if value_at[key] < 0:
                    if key in (SPLIT_FEATURE, THRESHOLD, LEFT_CHILD, RIGHT_CHILD):
                        return None
                    if key == DECISION_TYPE:
                        column.reserve(m)
                        for k in range(m):
                            column.i[column.size + k] = 0
                        column.size += m
                    else:
                        missing[key] = True
                elif _numbers(s + value_at[key], value_len[key], m, column) < 0:
                    return None
            column = columns[DECISION_TYPE]
            for k in range(column.size - m, column.size):
                if column.i[k] < 0 or column.i[k] > 255:
                    return None
        # the leaf fields
        if value_at[LEAF_VALUE] < 0 or _numbers(s + value_at[LEAF_VALUE], value_len[LEAF_VALUE], leaves,
                                                 columns[LEAF_VALUE]) < 0:
            return None
        column = columns[LEAF_WEIGHT]
        if m == 0:  # LightGBM stops reading a one-leaf tree before its leaf_weight
            column.reserve(1)
            column.f[column.size] = 0.0
            column.size += 1
        elif value_at[LEAF_WEIGHT] < 0:
            missing[LEAF_WEIGHT] = True
        elif _numbers(s + value_at[LEAF_WEIGHT], value_len[LEAF_WEIGHT], leaves, column) < 0:
            return None
        if value_at[LEAF_COUNT] < 0:
            missing[LEAF_COUNT] = True
        elif _numbers(s + value_at[LEAF_COUNT], value_len[LEAF_COUNT], leaves, columns[LEAF_COUNT]) < 0:
            return None
        # the categorical splits' bitsets
        if cats > 0:
            column = columns[CAT_BOUNDARIES]
            if value_at[CAT_BOUNDARIES] < 0 or _numbers(s + value_at[CAT_BOUNDARIES], value_len[CAT_BOUNDARIES],
                                                         cats + 1, column) < 0:
                return None
            previous = 0
            for k in range(column.size - cats - 1, column.size):
                word = column.i[k]
                if (k == column.size - cats - 1 and word != 0) or word < previous:
                    return None
                previous = word
                column.i[k] = word + cat_words
            count = previous
            if count > 0:
                column = columns[CAT_THRESHOLD]
                if value_at[CAT_THRESHOLD] < 0 or _numbers(s + value_at[CAT_THRESHOLD], value_len[CAT_THRESHOLD],
                                                            count, column) < 0:
                    return None
                for k in range(column.size - count, column.size):
                    if column.i[k] < 0 or column.i[k] > 0xFFFFFFFF:
                        return None
            cat_words += count
        num_leaves.append(leaves)
        num_cat.append(cats)
        shrinkage.append(shrink)
    if n - pos < 12 or memcmp(s + pos, b"end of trees", 12) != 0:
        return None
    starts.append(pos)
    out = {"starts": np.asarray(starts, dtype=np.int64), "num_leaves": np.asarray(num_leaves, dtype=np.int64),
           "num_cat": np.asarray(num_cat, dtype=np.int64), "shrinkage": np.asarray(shrinkage, dtype=np.float64)}
    for key in range(SPLIT_FEATURE, CAT_THRESHOLD + 1):
        out[keys[key].decode()] = None if missing[key] else (<_Column>columns[key]).array()
    return out
