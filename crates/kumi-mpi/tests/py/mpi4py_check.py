"""mpi4py (the PyPI wheel, MPICH-ABI flavour) running on kumi's libmpi.so.12.

Run under `kumi run -n N python3 mpi4py_check.py` with MPI4PY_MPIABI=mpich and
MPI4PY_LIBMPI (or LD_LIBRARY_PATH) pointing at kumi's library. Prints
"PASS mpi4py" on rank 0 when every check holds; any failure raises, which
ends the job with a traceback.
"""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
assert "kumi" in MPI.Get_library_version(), MPI.Get_library_version()
right, left = (rank + 1) % size, (rank - 1) % size

# Pickled objects: send/recv and sendrecv around the ring.
got = comm.sendrecv({"from": rank, "data": [rank] * 3}, dest=right, source=left)
assert got == {"from": left, "data": [left] * 3}, got
if rank == 0:
    for _ in range(size - 1):
        st = MPI.Status()
        msg = comm.recv(source=MPI.ANY_SOURCE, tag=5, status=st)
        assert msg == ("hello", st.Get_source()), msg
else:
    comm.send(("hello", rank), dest=0, tag=5)

# numpy buffers: Send/Recv, Isend/Irecv, with dtype mapping.
a = np.arange(1000, dtype=np.float64) + rank
b = np.empty_like(a)
req = comm.Irecv(b, source=left, tag=1)
comm.Send(a, dest=right, tag=1)
req.Wait()
assert np.array_equal(b, np.arange(1000, dtype=np.float64) + left)

# Collectives: bcast (pickled and buffer), allreduce, Allreduce on numpy.
obj = comm.bcast({"root": "says hi"} if rank == 0 else None, root=0)
assert obj == {"root": "says hi"}
buf = np.full(4, rank, dtype=np.int32)
comm.Bcast(buf, root=size - 1)
assert (buf == size - 1).all()
assert comm.allreduce(rank, op=MPI.SUM) == size * (size - 1) // 2
x = np.array([rank, 1.0, -rank], dtype=np.float64)
y = np.zeros(3)
comm.Allreduce(x, y, op=MPI.MAX)
assert np.array_equal(y, [size - 1, 1.0, 0.0]), y
comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)
assert x[1] == size
# numpy complex numbers, and the location of a maximum (MPI.DOUBLE_INT on
# a structured array laid out as C's struct { double; int; }).
zs = np.array([rank + 1j, 2 - 1j * rank], dtype=np.complex128)
zt = np.empty_like(zs)
comm.Allreduce(zs, zt, op=MPI.SUM)
n2 = size * (size - 1) // 2
assert np.array_equal(zt, [n2 + 1j * size, 2 * size - 1j * n2]), zt
comm.Allreduce(MPI.IN_PLACE, zs, op=MPI.PROD)
want = np.prod([q + 1j for q in range(size)])
assert zs[0] == want, (zs, want)
vi = np.dtype([("v", np.float64), ("i", np.int32)], align=True)
pairs = np.zeros(2, dtype=vi)
pairs["v"], pairs["i"] = [rank % 2, -rank], rank
top = np.zeros(2, dtype=vi)
comm.Allreduce([pairs, MPI.DOUBLE_INT], [top, MPI.DOUBLE_INT], op=MPI.MAXLOC)
assert list(top["v"]) == [min(size - 1, 1), 0] and list(top["i"]) == [min(size - 1, 1), 0], top
allg = comm.allgather(rank * 10)
assert allg == [10 * i for i in range(size)]

# Communicator split.
sub = comm.Split(color=rank % 2, key=-rank)
assert sub.Get_size() == (size + 1 - rank % 2) // 2
assert sub.allreduce(1) == sub.Get_size()
members = sub.allgather(rank)
assert members == sorted(members, reverse=True), members
sub.Free()

# Derived datatypes (mpi4py makes them with the large-count constructors):
# every other double of a buffer, a struct, a subarray.
vec = MPI.DOUBLE.Create_vector(4, 1, 2).Commit()
src = np.arange(8, dtype=np.float64) * (rank + 1)
dst = np.zeros(8)
comm.Sendrecv([src, 1, vec], dest=right, recvbuf=[dst, 1, vec], source=left)
assert np.array_equal(dst[::2], np.arange(0, 8, 2) * (left + 1)) and not dst[1::2].any(), dst
vec.Free()
rec = np.dtype([("x", np.float64), ("n", np.int32)], align=True)
st = MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.DOUBLE, MPI.INT]).Create_resized(0, rec.itemsize).Commit()
arr = np.zeros(3, dtype=rec)
if rank == 0:
    arr["x"], arr["n"] = [1.5, 2.5, 3.5], [7, 8, 9]
comm.Bcast([arr, 3, st], root=0)
assert list(arr["n"]) == [7, 8, 9] and arr["x"][2] == 3.5, arr
st.Free()
sub_t = MPI.INT.Create_subarray([4, 4], [2, 2], [1, 1]).Commit()
grid = np.arange(16, dtype=np.int32)
packed = bytearray(sub_t.Pack_size(1, comm))
pos = sub_t.Pack(grid, packed, 0, comm)
assert pos == 16 and list(np.frombuffer(bytes(packed), dtype=np.int32)) == [5, 6, 9, 10]
sub_t.Free()

# A user-defined (non-commutative) operation: 2x2 matrix products in rank order.
def matmul(a, b, t):
    x = np.frombuffer(a, dtype=np.int64).reshape(2, 2)
    y = np.frombuffer(b, dtype=np.int64).reshape(2, 2)
    np.frombuffer(b, dtype=np.int64)[:] = (x @ y).ravel()
op = MPI.Op.Create(matmul, commute=False)
m = np.array([[1, rank], [0, 1]], dtype=np.int64)
out = np.zeros_like(m)
comm.Allreduce(m, out, op=op)
assert np.array_equal(out, [[1, size * (size - 1) // 2], [0, 1]]), out
op.Free()

# A graph topology (a ring) and a neighbourhood collective on it.
index = [2 * (i + 1) for i in range(size)]
edges = [e for i in range(size) for e in ((i - 1) % size, (i + 1) % size)]
g = comm.Create_graph(index, edges)
assert g.Get_topology() == MPI.GRAPH and g.Get_neighbors(rank) == [left, right]
assert g.neighbor_allgather(rank) == [left, right]
g.Free()

# One-sided: a shared-memory window of the ranks of this host.
host = comm.Split_type(MPI.COMM_TYPE_SHARED)
hr, hn = host.Get_rank(), host.Get_size()
win = MPI.Win.Allocate_shared(8 * 4, 8, comm=host)
buf = np.ndarray(buffer=win.tomemory(), dtype=np.float64, shape=(4,))
buf[:] = 0
win.Fence()
win.Put(np.array([float(hr)]), (hr + 1) % hn, target=0)
win.Accumulate(np.array([1.0]), 0, target=3, op=MPI.SUM)
win.Fence()
assert buf[0] == (hr - 1) % hn, buf
if hr == 0:
    assert buf[3] == hn, buf
mem, unit = win.Shared_query(0)
assert unit == 8
win.Free()
host.Free()

comm.Barrier()
if rank == 0:
    print("PASS mpi4py", flush=True)
