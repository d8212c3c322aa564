"""mpi4py.futures on kumi: `kumi run -n N python -m mpi4py.futures futures_check.py`.

Rank 0 runs this script as the manager, the other ranks serve as workers;
mpi4py joins them with an intercommunicator (MPI_Comm_create with disjoint
groups, MPI_Intercomm_create) and drives it from a second thread (it asks
for MPI_THREAD_SERIALIZED). Prints "PASS futures" when the results are right.
"""
from mpi4py import MPI
from mpi4py.futures import MPIPoolExecutor


def work(x):
    return x * x, MPI.COMM_WORLD.Get_rank()


if __name__ == "__main__":
    with MPIPoolExecutor() as ex:
        results = list(ex.map(work, range(40)))
    assert [v for v, _ in results] == [x * x for x in range(40)], results
    ranks = {r for _, r in results}
    assert 0 not in ranks and ranks <= set(range(1, MPI.COMM_WORLD.Get_size())), ranks
    print("PASS futures", flush=True)
