! Collectives from Fortran 90 (`use mpi`): every kind with MPI_IN_PLACE,
! the Fortran datatypes and their reductions (MAXLOC on
! MPI_2DOUBLE_PRECISION, LAND on LOGICAL), and a user-defined operation.
program coll
  use mpi
  implicit none
  integer :: ierr, rank, np, i, root, myop
  integer, allocatable :: counts(:), displs(:), ga(:), sa(:)
  integer :: x(4), y(4)
  real :: r(2)
  double precision :: d(2), pair(2, 2)
  complex :: c(1)
  logical :: l(1)
  external :: user_sum
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  root = np - 1
  ! Bcast, reduce and allreduce in place.
  x = 0
  if (rank == root) x = (/ 1, 2, 3, 4 /)
  call MPI_Bcast(x, 4, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
  call check(all(x == (/ 1, 2, 3, 4 /)), 'bcast')
  x = rank + 1
  if (rank == root) then
     call MPI_Reduce(MPI_IN_PLACE, x, 4, MPI_INTEGER, MPI_SUM, root, MPI_COMM_WORLD, ierr)
     call check(all(x == np * (np + 1) / 2), 'reduce in place')
  else
     call MPI_Reduce(x, y, 4, MPI_INTEGER, MPI_SUM, root, MPI_COMM_WORLD, ierr)
  end if
  r = real(rank)
  call MPI_Allreduce(MPI_IN_PLACE, r, 2, MPI_REAL, MPI_MAX, MPI_COMM_WORLD, ierr)
  call check(r(1) == real(np - 1), 'allreduce real max')
  d = dble(rank) + 0.25d0
  call MPI_Allreduce(MPI_IN_PLACE, d, 2, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(abs(d(1) - (dble(np * (np - 1) / 2) + 0.25d0 * np)) < 1d-12, 'allreduce double')
  c(1) = cmplx(1.0, real(rank))
  call MPI_Allreduce(MPI_IN_PLACE, c, 1, MPI_COMPLEX, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(real(c(1)) == real(np), 'allreduce complex')
  l(1) = rank >= 0
  call MPI_Allreduce(MPI_IN_PLACE, l, 1, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD, ierr)
  call check(l(1), 'allreduce logical land')
  ! MAXLOC: value and rank, as Fortran pairs.
  pair(1, 1) = dble(mod(rank * 7, np))
  pair(2, 1) = dble(rank)
  call MPI_Allreduce(pair(:, 1), pair(:, 2), 1, MPI_2DOUBLE_PRECISION, MPI_MAXLOC, &
       MPI_COMM_WORLD, ierr)
  call check(pair(1, 2) == dble(maxval((/ (mod(i * 7, np), i = 0, np - 1) /))), 'maxloc value')
  ! Gather(v) and scatter(v), allgather(v) in place, alltoall.
  allocate(counts(np), displs(np), ga(max(np * (np + 1) / 2 + np, np * 4)), sa(np * 4))
  do i = 1, np
     counts(i) = i
     displs(i) = (i - 1) * i / 2 + (i - 1)
  end do
  sa = rank
  call MPI_Gatherv(sa, rank + 1, MPI_INTEGER, ga, counts, displs, MPI_INTEGER, 0, &
       MPI_COMM_WORLD, ierr)
  if (rank == 0) then
     do i = 1, np
        call check(ga(displs(i) + i) == i - 1, 'gatherv')
     end do
  end if
  sa = (/ (i, i = 1, np * 4) /)
  call MPI_Scatter(sa, 4, MPI_INTEGER, y, 4, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call check(y(1) == rank * 4 + 1, 'scatter')
  sa = -1
  sa(rank * 4 + 1 : rank * 4 + 4) = rank
  call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, sa, 4, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call check(all(sa(1:np * 4:4) == (/ (i, i = 0, np - 1) /)), 'allgather in place')
  sa = (/ (rank * 100 + i, i = 0, np * 4 - 1) /)
  ga(1:np * 4) = 0
  call MPI_Alltoall(sa, 4, MPI_INTEGER, ga, 4, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call check(ga(1) == rank * 4 .and. ga(4 * (np - 1) + 1) == (np - 1) * 100 + rank * 4, 'alltoall')
  ! Scan and exscan.
  x = 1
  call MPI_Scan(x, y, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(y(1) == rank + 1, 'scan')
  ! A user-defined operation (Fortran's calling convention).
  call MPI_Op_create(user_sum, .true., myop, ierr)
  x = 1
  call MPI_Allreduce(MPI_IN_PLACE, x, 4, MPI_INTEGER, myop, MPI_COMM_WORLD, ierr)
  call check(all(x == np), 'user op')
  call MPI_Op_free(myop, ierr)
  call check(myop == MPI_OP_NULL, 'op freed')
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) print *, 'coll ok'
  call MPI_Finalize(ierr)
contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    integer :: e
    if (.not. ok) then
       print *, 'FAILED: ', what
       call MPI_Abort(MPI_COMM_WORLD, 1, e)
    end if
  end subroutine check
end program coll

! inout = in + inout, elementwise: the reduction of 1s over np ranks is np.
subroutine user_sum(invec, inoutvec, len, datatype)
  implicit none
  integer :: len, datatype, i
  integer :: invec(len), inoutvec(len)
  do i = 1, len
     inoutvec(i) = invec(i) + inoutvec(i)
  end do
end subroutine user_sum
