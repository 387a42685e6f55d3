"""Ingest: integer coding of ids and rows.

Identifier columns become integer codes into their sorted string forms (:func:`ids_to_str`,
:func:`_id_codes`; a column of NumPy integers is coded from its integers), the int-coded rows are sorted by
item into CSR arrays with their repeated (item, labeler) pairs found (:func:`_item_csr`), and ids are looked
up among an annotation set's items (:func:`_item_index`, :func:`_positions`). From
:data:`_COMPILED_MIN_ROWS` rows on, the kernels run compiled (numba) when numba is installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from heroeval.core import jit
from heroeval.errors import DataError


def ids_to_str(s: pd.Series) -> pd.Series:
    """Identifiers as strings; missing stay missing; 3.0 from a float column becomes '3'.

    A column of text whose every id is an integer written as a float (``'3.0'``: what pandas writes for an
    integer id column that had a missing value) is read the same way: ``'3.0'`` becomes ``'3'``. A column
    that mixes such ids with others (``'3.0'`` and ``'x'``) is left as it is.
    """
    if pd.api.types.is_float_dtype(s.dtype):
        vals = s.to_numpy(dtype=np.float64, na_value=np.nan)
        finite = vals[~np.isnan(vals)]
        if finite.size and np.all(np.isfinite(finite)) and np.all(np.abs(finite) < 2.0**53) and np.all(
            finite == np.round(finite)
        ):
            s = s.astype("Int64")
    out = s.astype("string")
    if not (pd.api.types.is_float_dtype(s.dtype) or pd.api.types.is_integer_dtype(s.dtype)) and len(out):
        stripped = out.str.strip()
        present = stripped.notna() & (stripped != "")
        if present.any():
            floaty = stripped[present].str.fullmatch(_FLOAT_INT_ID)
            if bool(floaty.all()):
                out = out.copy()
                out[present] = stripped[present].str.replace(_FLOAT_INT_TAIL, "", regex=True)
    return out


_FLOAT_INT_ID = r"[+-]?\d+\.0+"
_FLOAT_INT_TAIL = r"\.0+$"


def item_order(ids: npt.NDArray[Any], seed: int) -> npt.NDArray[np.int64]:
    """A seeded pseudo-random order of ``ids`` that depends on the ids (as text) alone, not on the order they
    come in: the positions sorted by a 64-bit hash of each id keyed by ``seed`` (pandas' SipHash), ties by the
    id. The model checks deal their folds in this order, so that every reader of a history (the DuckDB reader
    orders integer ids as numbers, the pandas reader and a Dask history as text) gets the same folds."""
    text = np.asarray(ids).astype(str).astype(object)
    h = pd.util.hash_array(text, hash_key=f"hero{int(seed) & 0xFFFFFFFFFFFF:012x}", categorize=False)
    out: npt.NDArray[np.int64] = np.lexsort((text, h)).astype(np.int64)
    return out


def _id_codes(s: pd.Series) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.object_]]:
    """Integer codes into the sorted string forms of an id column; -1 for missing or blank.

    Factorises the raw values first and turns only the distinct values into
    strings, so a column of 1e7 integer ids costs one hash pass (a column of
    NumPy integers: a lookup table when its values span a short range).
    """
    if _is_plain_int(s.dtype) and len(s):
        return _int_id_codes(s.to_numpy())
    codes, uniques = pd.factorize(s, use_na_sentinel=True)
    ustr = ids_to_str(pd.Series(uniques))
    blank = ustr.isna().to_numpy() | (ustr.str.strip() == "").fillna(True).to_numpy()
    ucodes, names = pd.factorize(ustr.where(~blank), sort=True, use_na_sentinel=True)
    remap = np.asarray(ucodes, dtype=np.int64)
    if remap.size == 0:  # every value missing
        return np.full(len(codes), -1, dtype=np.int64), np.asarray(names, dtype=object)
    out = np.where(codes >= 0, remap[np.maximum(codes, 0)], -1)
    return out.astype(np.int64), np.asarray(names, dtype=object)


_COMPILED_MIN_ROWS = 1_000_000
"""From this many rows on, :func:`_item_csr` and :func:`_int_id_codes` run compiled (numba), when numba is
installed; below it, compiling (or loading the compiled code) costs more than it saves."""


def _is_plain_int(dtype: Any) -> bool:
    """A NumPy integer dtype (not bool, not pandas' nullable Int64): a column that cannot hold a missing value."""
    return isinstance(dtype, np.dtype) and dtype.kind in "iu"


def _int_id_codes(vals: npt.NDArray[np.integer[Any]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.object_]]:
    """:func:`_id_codes` of a non-empty column of NumPy integers (never missing, never blank).

    Distinct integers have distinct decimal forms (``str(int)``, as ``astype("string")`` writes them), so
    the distinct values are ordered as their strings (:func:`_decimal_order`) and only they are turned into
    strings; the rows' codes are one lookup.
    """
    import pyarrow as pa  # a dependency of heroeval; imported here to keep `import heroeval` light

    lo, hi = int(vals.min()), int(vals.max())
    wide = np.uint64 if vals.dtype.kind == "u" else np.int64  # values (and their offsets from lo) in this type
    if hi - lo < max(2 * vals.size, 1 << 16):  # a short range: a lookup table instead of a hash
        compiled = vals.size >= _COMPILED_MIN_ROWS and jit.HAVE_NUMBA
        base = wide(lo)
        offset = None if compiled else np.subtract(vals, base, dtype=wide).astype(np.intp, copy=False)
        present = np.zeros(hi - lo + 1, dtype=bool)
        if compiled:
            jit.serial(_mark_kernel)(vals, base, present)
        else:
            present[offset] = True
        uniques = np.flatnonzero(present)  # value - lo, ascending
        values: npt.NDArray[Any] = uniques.astype(wide) + base
        order = _decimal_order(values)
        lookup = np.zeros(hi - lo + 1, dtype=np.int64)  # value - lo -> rank of its string
        lookup[uniques[order]] = np.arange(order.size, dtype=np.int64)
        if compiled:
            codes = np.empty(vals.size, dtype=np.int64)
            jit.serial(_lookup_kernel)(vals, base, lookup, codes)
        else:
            codes = lookup[offset]
    else:
        raw_codes, raw_uniques = pd.factorize(vals)
        ascending = np.argsort(raw_uniques)
        values = np.asarray(raw_uniques, dtype=wide)[ascending]
        order = _decimal_order(values)
        rank = np.empty(order.size, dtype=np.int64)
        rank[ascending[order]] = np.arange(order.size, dtype=np.int64)
        codes = rank[raw_codes]
    names = pa.array(values[order]).cast(pa.string()).to_numpy(zero_copy_only=False)
    return codes, np.asarray(names, dtype=object)


_POWERS_OF_TEN = 10 ** np.arange(19, dtype=np.int64)


def _decimal_order(values: npt.NDArray[Any]) -> npt.NDArray[np.intp]:
    """The permutation that sorts distinct integers, given in ascending order, as their decimal strings.

    Strings compare digit by digit, a prefix first: the order of ``v * 10**(D - digits(v))`` (the digits of
    ``v`` padded with zeros to ``D``), ties (``1``, ``10``, ``100``) kept in ascending order by a stable sort.
    Negative numbers (a leading ``"-"``) come first, ordered by their absolute values the same way. Values
    of 10**18 or more in absolute value are sorted as strings.
    """
    if values.size and max(-int(values[0]), int(values[-1])) >= 10**18:
        import pyarrow as pa
        import pyarrow.compute as pc

        return np.asarray(pc.sort_indices(pa.array(values).cast(pa.string())).to_numpy(), dtype=np.intp)
    v = values.astype(np.int64)
    n_neg = int(np.searchsorted(v, 0))
    parts = []
    if n_neg:  # the magnitudes of the negatives in ascending order are v[n_neg - 1], v[n_neg - 2], ...
        parts.append(n_neg - 1 - _padded_order(-v[n_neg - 1::-1]))
    if n_neg < v.size:
        parts.append(n_neg + _padded_order(v[n_neg:]))
    return np.concatenate(parts).astype(np.intp) if parts else np.zeros(0, dtype=np.intp)


def _padded_order(mags: npt.NDArray[np.int64]) -> npt.NDArray[np.intp]:
    """:func:`_decimal_order` of ascending non-negative integers below 10**18."""
    digits = np.maximum(np.searchsorted(_POWERS_OF_TEN, mags, side="right"), 1)
    padded = mags * _POWERS_OF_TEN[int(digits.max()) - digits]
    return np.argsort(padded, kind="stable")  # ascending runs, one per digit count: timsort merges them


def _mark_kernel(vals: npt.NDArray[Any], base: Any, present: npt.NDArray[np.bool_]) -> None:
    """``present[v - base] = True`` for every value ``v`` (compiled by numba)."""
    for a in range(vals.shape[0]):
        present[vals[a] - base] = True


def _lookup_kernel(vals: npt.NDArray[Any], base: Any, lookup: npt.NDArray[np.int64],
                   codes: npt.NDArray[np.int64]) -> None:
    """``codes[a] = lookup[vals[a] - base]`` (compiled by numba)."""
    for a in range(vals.shape[0]):
        codes[a] = lookup[vals[a] - base]


def _compact(
    codes: npt.NDArray[np.int64], names: npt.NDArray[np.object_]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.object_]]:
    """Renumber codes 0..k-1 over the names actually used, keeping their sorted order."""
    used = np.zeros(len(names), dtype=bool)
    used[codes] = True
    if used.all():
        return codes.astype(np.int64, copy=False), np.asarray(names, dtype=object)
    new = np.cumsum(used) - 1
    return new[codes].astype(np.int64), np.asarray(names, dtype=object)[used]


def _item_csr(
    item: npt.NDArray[np.int64], labeler: npt.NDArray[np.int64], label: npt.NDArray[np.int8], n_items: int,
    n_labelers: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.int8], npt.NDArray[np.bool_]]:
    """The rows sorted by item: CSR offsets, labeler codes and labels (a stable sort: each item's rows stay in file
    order), and, in row order, which rows repeat the (item, labeler) pair of an earlier row."""
    if item.size >= _COMPILED_MIN_ROWS and jit.HAVE_NUMBA:
        ptr = np.zeros(n_items + 1, dtype=np.int64)
        labeler_sorted = np.empty(item.size, dtype=np.int32)
        label_sorted = np.empty(item.size, dtype=np.int8)
        dup = np.zeros(item.size, dtype=np.bool_)
        jit.serial(_item_csr_kernel)(item, labeler, label, ptr, labeler_sorted, label_sorted, dup, n_labelers)
        return ptr, labeler_sorted, label_sorted, dup
    order = np.argsort(item, kind="stable")
    ptr = np.zeros(n_items + 1, dtype=np.int64)
    np.cumsum(np.bincount(item, minlength=n_items), out=ptr[1:])
    dup = pd.Series(item * max(n_labelers, 1) + labeler).duplicated(keep="first").to_numpy()
    return ptr, labeler[order].astype(np.int32), label[order].astype(np.int8), dup


def _item_csr_kernel(
    item: npt.NDArray[np.int64], labeler: npt.NDArray[np.int64], label: npt.NDArray[np.int8],
    ptr: npt.NDArray[np.int64], labeler_sorted: npt.NDArray[np.int32], label_sorted: npt.NDArray[np.int8],
    dup: npt.NDArray[np.bool_], n_labelers: int,
) -> None:
    """:func:`_item_csr` as a counting sort, compiled by numba (fills ``ptr``, the sorted arrays and ``dup``).

    Item codes must be in ``0 .. len(ptr) - 2`` and labeler codes in ``0 .. n_labelers - 1`` (numba does not
    check bounds).
    """
    n = item.shape[0]
    n_items = ptr.shape[0] - 1
    for a in range(n):
        ptr[item[a] + 1] += 1
    for k in range(n_items):
        ptr[k + 1] += ptr[k]
    nxt = ptr[:-1].copy()  # each item's next free slot
    for a in range(n):
        p = nxt[item[a]]
        labeler_sorted[p] = labeler[a]
        label_sorted[p] = label[a]
        nxt[item[a]] = p + 1
    # repeats, found in item order (the slots of an item hold its rows in file order) ...
    repeat = np.zeros(n, dtype=np.bool_)
    last_item = np.full(n_labelers, -1, dtype=np.int64)  # the last item in which each labeler was seen
    n_repeats = 0
    for k in range(n_items):
        for p in range(ptr[k], ptr[k + 1]):
            if last_item[labeler_sorted[p]] == k:
                repeat[p] = True
                n_repeats += 1
            else:
                last_item[labeler_sorted[p]] = k
    # ... and marked in row order by walking the rows to their slots again
    if n_repeats:
        nxt[:] = ptr[:-1]
        for a in range(n):
            p = nxt[item[a]]
            dup[a] = repeat[p]
            nxt[item[a]] = p + 1


_EXACT = 2.0 ** 53
"""Whole numbers written as floats ("12.0", "1e3") are taken below this size only, where a float is exact."""


def whole_numbers(ids: npt.NDArray[Any] | Sequence[Any]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Each id's integer value where its text is a whole number, and which are: digits are parsed as integers
    (exactly, whatever their size within int64), other numbers ("12.0", "1e3") as floats below 2**53. Through
    floats, item ids 2**60 and 2**60 + 1 were one number, and a gold label could go to the wrong item."""
    s = pd.Series(np.asarray(ids, dtype=object)).astype(str).str.strip()
    values = np.zeros(len(s), dtype=np.int64)
    ok = np.zeros(len(s), dtype=bool)
    digits = s.str.fullmatch(r"[+-]?\d{1,19}").fillna(False).to_numpy(dtype=bool)
    if digits.any():
        as_int = [int(x) for x in s[digits]]
        fits = np.array([-(2**63) <= v < 2**63 for v in as_int], dtype=bool)
        at = np.flatnonzero(digits)[fits]
        values[at] = np.array([v for v, f in zip(as_int, fits, strict=True) if f], dtype=np.int64)
        ok[at] = True
    rest = np.flatnonzero(~digits)
    if rest.size:
        num = pd.to_numeric(s.iloc[rest], errors="coerce").to_numpy(dtype=float)
        whole = np.isfinite(num) & (num == np.round(num)) & (np.abs(num) < _EXACT)
        values[rest[whole]] = num[whole].astype(np.int64)
        ok[rest[whole]] = True
    return values, ok


def _item_index(item_ids_arr: npt.NDArray[Any], ids: npt.NDArray[Any], *,
                ids_sorted: bool = False) -> npt.NDArray[np.intp]:
    """Positions of ``ids`` (strings) among the items, -1 where absent.

    ``ids_sorted``: ``item_ids_arr`` are in sorted order (strings as strings, integers as numbers), so a bisection
    per id finds them without a hash table of every item (the gold table is usually much smaller than the items).
    Integer ids are checked for order when not told.
    """
    if ids_sorted and item_ids_arr.dtype == object:
        ids = np.asarray(ids, dtype=object)
        pos = np.searchsorted(item_ids_arr, ids)
        hit = pos < item_ids_arr.size
        hit[hit] = item_ids_arr[pos[hit]] == ids[hit]
        return np.where(hit, pos, -1).astype(np.intp)
    if item_ids_arr.dtype.kind in "iu":
        values, ok = whole_numbers(ids)
        out = np.full(len(ids), -1, dtype=np.intp)
        if ok.any():
            want = values[ok]
            if item_ids_arr.size and (ids_sorted or bool(np.all(item_ids_arr[1:] > item_ids_arr[:-1]))):
                # the DuckDB reader's integer items are in numeric order: a binary search, no hash table of them
                at = np.minimum(np.searchsorted(item_ids_arr, want), item_ids_arr.size - 1)
                out[ok] = np.where(item_ids_arr[at] == want, at, -1)
            else:
                out[ok] = pd.Index(item_ids_arr).get_indexer(pd.Index(want))
        return out
    return np.asarray(pd.Index(item_ids_arr).get_indexer(pd.Index(ids)), dtype=np.intp)


def _positions(item_ids: npt.NDArray[Any], ids: npt.NDArray[Any], what: str) -> npt.NDArray[np.intp]:
    """Positions of ``ids`` among ``item_ids`` (as strings); unknown ids are an error naming them."""
    index = {str(x): i for i, x in enumerate(item_ids)}
    pos = np.array([index.get(str(x), -1) for x in ids], dtype=np.intp)
    if (pos < 0).any():
        shown = ", ".join(repr(str(x)) for x in ids[pos < 0][:5])
        raise DataError(f"{what}: {int((pos < 0).sum())} item(s) are not in the annotation set: {shown}")
    return pos
