! Derived datatypes from Fortran: vector (a matrix row), contiguous, and a
! struct built with MPI_Get_address displacements sent from MPI_BOTTOM.
program types
  use mpi
  implicit none
  integer :: ierr, rank, np, row, blk, st, i, j, lens(2), tys(2), sz
  integer(kind=MPI_ADDRESS_KIND) :: disp(2), lb, ext
  double precision :: m(4, 3), v(3)
  integer :: k(2), kk(2)
  double precision :: q, qq
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  ! Row 2 of a 4x3 column-major matrix: 3 elements, stride 4.
  call MPI_Type_vector(3, 1, 4, MPI_DOUBLE_PRECISION, row, ierr)
  call MPI_Type_commit(row, ierr)
  call MPI_Type_size(row, sz, ierr)
  call check(sz == 24, 'vector size')
  call MPI_Type_get_extent(row, lb, ext, ierr)
  call check(lb == 0 .and. ext == 8 * 9, 'vector extent')
  do j = 1, 3
     do i = 1, 4
        m(i, j) = 10 * i + j
     end do
  end do
  call MPI_Sendrecv(m(2, 1), 1, row, rank, 1, v, 3, MPI_DOUBLE_PRECISION, rank, 1, &
       MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call check(all(v == (/ 21d0, 22d0, 23d0 /)), 'vector row')
  call MPI_Type_free(row, ierr)
  ! A struct of two integers and a double, addressed absolutely.
  call MPI_Get_address(k, disp(1), ierr)
  call MPI_Get_address(q, disp(2), ierr)
  lens = (/ 2, 1 /)
  tys = (/ MPI_INTEGER, MPI_DOUBLE_PRECISION /)
  call MPI_Type_create_struct(2, lens, disp, tys, blk, ierr)
  call MPI_Type_commit(blk, ierr)
  k = (/ rank, -rank /)
  q = 0.5d0 * rank
  call MPI_Get_address(kk, disp(1), ierr)
  call MPI_Get_address(qq, disp(2), ierr)
  call MPI_Type_create_struct(2, lens, disp, tys, st, ierr)
  call MPI_Type_commit(st, ierr)
  call MPI_Sendrecv(MPI_BOTTOM, 1, blk, rank, 2, MPI_BOTTOM, 1, st, rank, 2, &
       MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call check(kk(2) == -rank .and. qq == 0.5d0 * rank, 'struct from MPI_BOTTOM')
  call MPI_Type_free(blk, ierr)
  call MPI_Type_free(st, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) print *, 'types ok'
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
end program types
