"""Shape arithmetic for layout ops: indices, reshape, expand, permute, cat.

Pure functions of shapes and Python values.  Each validates its input and
raises an error naming the op, so backends receive only well-formed requests.
"""
import numbers
import operator
import sys


def normalize_shape(name, shape):
    """An int, a tuple/list of ints, or varargs -> a tuple of non-negative ints."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for n in shape:   # the common case first: plain ints (an ABC check costs ~0.2 us a dim)
        if type(n) is not int:
            break
    else:
        return tuple(shape)
    out = []
    for n in shape:
        if not isinstance(n, numbers.Integral) or isinstance(n, bool):
            raise TypeError(f"{name}: shape entries must be ints, got {shape!r}")
        out.append(int(n))
    return tuple(out)


def check_size(name, shape):
    """``shape`` unless its element count is beyond what an array can index (2**63 - 1):
    numpy's own error there does not name the op."""
    size = 1
    for n in shape:
        size *= n
    if size > sys.maxsize or any(n > sys.maxsize for n in shape):
        raise ValueError(f"{name}: shape {shape} has more than 2**63 - 1 elements")
    return shape


def creation_shape(name, shape):
    shape = normalize_shape(name, shape)
    if any(n < 0 for n in shape):
        raise ValueError(f"{name}: negative dimension in shape {shape}")
    return check_size(name, shape)


def reshape(shape, new):
    new = normalize_shape("reshape", new)
    size = 1
    for n in shape:
        size *= n
    if new.count(-1) > 1:
        raise ValueError(f"reshape: only one dim may be -1, got {new}")
    if any(n < -1 for n in new):
        raise ValueError(f"reshape: invalid shape {new}")
    known = 1
    for n in new:
        if n != -1:
            known *= n
    if -1 in new:
        if known == 0 or size % known:
            raise ValueError(f"reshape: cannot reshape a tensor of shape {shape} into {new}")
        new = tuple(size // known if n == -1 else n for n in new)
    elif known != size:
        raise ValueError(f"reshape: cannot reshape a tensor of shape {shape} "
                         f"({size} elements) into {new}")
    return new


def expand(shape, new):
    new = normalize_shape("expand", new)
    if len(new) < len(shape):
        raise ValueError(f"expand: cannot expand shape {shape} to {new} (fewer dims)")
    off = len(new) - len(shape)
    out = list(new)
    for i, n in enumerate(shape):
        want = new[off + i]
        if want == -1:
            out[off + i] = n
        elif n != 1 and n != want:
            raise ValueError(f"expand: cannot expand shape {shape} to {new}: "
                             f"dim {i} has size {n}, not 1")
    if any(n < 0 for n in out):
        raise ValueError(f"expand: invalid shape {new}")
    return check_size("expand", tuple(out))


def permutation(dims, ndim):
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    norm = []
    for d in dims:
        if not isinstance(d, int) or not -max(ndim, 1) <= d < max(ndim, 1):
            raise ValueError(f"permute: dims {dims} are not a permutation of {ndim} dims")
        norm.append(d % max(ndim, 1))
    if sorted(norm) != list(range(ndim)):
        raise ValueError(f"permute: dims {dims} are not a permutation of {ndim} dims")
    return tuple(norm)


def basic_index(index, shape, name="getitem"):
    """Validate an index of ints, slices, None and Ellipsis; return a tuple numpy accepts."""
    # (per-op overhead: one counting pass, and ``type(x) is int`` before the slow
    # ``numbers.Integral`` check)
    if type(index) is not tuple:
        index = (index,)
    n_ell = n_none = 0
    for i in index:
        if i is Ellipsis:
            n_ell += 1
        elif i is None:
            n_none += 1
    if n_ell > 1:
        raise IndexError(f"{name}: an index can only have a single ellipsis ('...')")
    n_dims = len(index) - n_ell - n_none
    if n_dims > len(shape):
        raise IndexError(f"{name}: too many indices ({n_dims}) for a tensor of shape {shape}")
    out = []
    dim = 0
    for i in index:
        if i is Ellipsis:
            skip = len(shape) - n_dims
            out.append(Ellipsis)
            dim += skip
        elif i is None:
            out.append(None)
        elif type(i) is slice:
            start, stop, step = i.start, i.stop, i.step
            if not ((start is None or type(start) is int) and (stop is None or type(stop) is int)
                    and (step is None or type(step) is int)):
                parts = []
                for part in (start, stop, step):
                    if part is not None and not isinstance(part, numbers.Integral):
                        try:   # objects with __index__ (0-d Int tensors, numpy ints), as numpy takes
                            part = operator.index(part)
                        except TypeError:
                            raise TypeError(f"{name}: slice bounds must be ints or None, got {i!r}") from None
                    parts.append(part)
                i = slice(*parts)
            if i.step == 0:
                raise ValueError(f"{name}: slice step cannot be zero")
            out.append(i)
            dim += 1
        elif type(i) is int or (isinstance(i, numbers.Integral) and not isinstance(i, bool)):
            n = shape[dim]
            if not -n <= i < n:
                raise IndexError(f"{name}: index {i} is out of range for dim {dim} with size {n}")
            out.append(int(i))
            dim += 1
        else:
            raise TypeError(f"{name}: unsupported index {i!r} (use ints, slices, None, ...; "
                            f"index_select/gather/mask_where take tensor indices)")
    if n_ell == 0:
        out.append(Ellipsis)   # numpy then returns a view even when every index is an int
    return tuple(out)


def cat_shape(shapes, dim):
    first = shapes[0]
    head, tail = first[:dim], first[dim + 1:]
    for s in shapes[1:]:
        if len(s) != len(first) or s[:dim] != head or s[dim + 1:] != tail:
            raise ValueError(f"cat: shapes {' and '.join(str(x) for x in (first, s))} "
                             f"differ outside dim {dim}")
    n = 0
    for s in shapes:
        n += s[dim]
    return head + (n,) + tail
