export { driverOf, hostView, readHost, type HostView } from '../../api/run-driver';
