! kumi's `mpi` module: the constants and sentinels of `mpif.h` (generated
! from kumi's mpi.h), for programs that `use mpi`. The procedures are the
! ones of `mpif.h` (MPICH's Fortran ABI, in kumi's library).
module mpi
  implicit none
  include 'mpif.h'
end module mpi
