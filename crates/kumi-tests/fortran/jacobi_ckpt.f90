! The Fortran twin of jacobi_ckpt.c for the checkpoint tests: a 1-D Jacobi
! solver whose state is registered with the `kumi` module.
!   jacobi_ckpt_f N STEPS EVERY [SLEEP_US]
! With JACOBI_PIDS=DIR, each rank writes its pid to DIR/pid-<rank>.
program jacobi_ckpt_f
  use mpi
  use kumi
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  integer :: ierr, rank, nprocs, left, right, i, every, sleep_us, plen, pstat
  integer(c_int) :: restored, due, rc
  integer(8) :: n, steps
  integer(8), target :: step
  real(dp), allocatable, target :: u(:)
  real(dp), allocatable :: v(:)
  real(dp) :: local, total
  character(len=64) :: arg
  character(len=4096) :: pids
  interface
    integer(c_int) function usleep(us) bind(C, name="usleep")
      import :: c_int
      integer(c_int), value :: us
    end function
    integer(c_int) function getpid() bind(C, name="getpid")
      import :: c_int
    end function
  end interface

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call get_command_argument(1, arg); read (arg, *) n
  call get_command_argument(2, arg); read (arg, *) steps
  call get_command_argument(3, arg); read (arg, *) every
  sleep_us = 0
  if (command_argument_count() > 3) then
    call get_command_argument(4, arg); read (arg, *) sleep_us
  end if
  call get_environment_variable("JACOBI_PIDS", pids, plen, pstat)
  if (pstat == 0) then
    write (arg, '(a,i0)') '/pid-', rank
    open (unit=10, file=trim(pids)//trim(arg), status='replace')
    write (10, '(i0)') getpid()
    close (10)
  end if
  allocate (u(0:n + 1), v(0:n + 1))
  do i = 1, int(n)
    u(i) = real(mod(int(rank, 8) * n + i, 7_8), dp) / 7.0_dp
  end do
  step = 0
  rc = kumi_ckpt_register(c_loc(u(1)), int(8 * n, c_size_t))
  rc = kumi_ckpt_register(c_loc(step), 8_c_size_t)
  rc = kumi_ckpt_restore(restored)
  if (restored /= 0 .and. rank == 0) write (0, '(a,i0)') 'jacobi: restored at step ', step
  left = rank - 1
  if (left < 0) left = MPI_PROC_NULL
  right = rank + 1
  if (right >= nprocs) right = MPI_PROC_NULL
  do while (step < steps)
    u(0) = 1.0_dp
    u(n + 1) = 0.0_dp
    call MPI_Sendrecv(u(1), 1, MPI_DOUBLE_PRECISION, left, 0, u(n + 1), 1, &
                      MPI_DOUBLE_PRECISION, right, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call MPI_Sendrecv(u(n), 1, MPI_DOUBLE_PRECISION, right, 1, u(0), 1, &
                      MPI_DOUBLE_PRECISION, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    if (rank == 0) u(0) = 1.0_dp
    if (rank == nprocs - 1) u(n + 1) = 0.0_dp
    do i = 1, int(n)
      v(i) = 0.5_dp * (u(i - 1) + u(i + 1))
    end do
    u(1:n) = v(1:n)
    if (sleep_us > 0) rc = usleep(int(sleep_us, c_int))
    step = step + 1
    if (every > 0) then
      due = 0
      if (mod(step, int(every, 8)) == 0) due = 1
    else
      rc = kumi_ckpt_due(due)
    end if
    if (due /= 0 .and. step < steps) rc = kumi_ckpt_save()
  end do
  local = sum(u(1:n))
  call MPI_Reduce(local, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) write (*, '(a,i0,a,es25.17)') 'result steps=', step, ' sum=', total
  call MPI_Finalize(ierr)
end program
