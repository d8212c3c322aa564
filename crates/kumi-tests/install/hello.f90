program hello
  use mpi
  implicit none
  integer :: ierr, r, n, s
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, r, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
  call MPI_Allreduce(r, s, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (r == 0) print '(a,i0,a,i0)', 'hello from Fortran: ', n, ' ranks, sum ', s
  call MPI_Finalize(ierr)
end program
