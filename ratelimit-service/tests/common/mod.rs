pub mod xds_server;
