"""An mpi4py script (no Weft) run under libweft-mpi.so by run_mpi4py.sh:
buffer and object collectives, blocking and nonblocking, on the world and on
a split communicator; each result is checked against its closed form."""
import array
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
errors = 0


def check(what, ok):
    global errors
    if not ok:
        errors += 1
        print(f"rank {rank}: {what} wrong", file=sys.stderr)


n = 1001
src = array.array('d', [rank + 1.0 + i for i in range(n)])
out = array.array('d', [0.0] * n)
comm.Allreduce(src, out, op=MPI.SUM)
check("Allreduce", all(out[i] == size * (size + 1) / 2 + size * i for i in range(n)))
req = comm.Iallreduce(src, out, op=MPI.MAX)
req.Wait()
check("Iallreduce", all(out[i] == size + i for i in range(n)))
b = array.array('i', [rank] * 17)
comm.Bcast(b, root=size - 1)
check("Bcast", list(b) == [size - 1] * 17)
g = array.array('i', [0] * size)
comm.Iallgather(array.array('i', [rank * 3]), g).Wait()
check("Iallgather", list(g) == [3 * r for r in range(size)])
a2a = array.array('i', [0] * size)
comm.Alltoall(array.array('i', [rank * 100 + r for r in range(size)]), a2a)
check("Alltoall", list(a2a) == [r * 100 + rank for r in range(size)])
check("allgather (objects)", comm.allgather(rank) == list(range(size)))
sub = comm.Split(rank % 2, -rank)
members = [r for r in range(size) if r % 2 == rank % 2]
check("split allreduce", sub.allreduce(rank) == sum(members))
sub.Free()
comm.Barrier()
total = comm.allreduce(errors)
if rank == 0:
    print(f"mpi4py {MPI.Get_library_version().splitlines()[0]}: {total} errors")
sys.exit(1 if total else 0)
