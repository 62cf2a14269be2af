/*
 * ndkping_steps.h - the asynchronous calls and the one event of an ndkping
 * connection, shared by its own protocol (ndkping.c) and its rping mode
 * (ndkping_rping.c). Each gets its own completion, so that a late callback
 * can never be mistaken for another's, and its NDKPI name for messages.
 */
#ifndef NDKPING_STEPS_H
#define NDKPING_STEPS_H

enum {
    K_CREATE_CQ,
    K_CREATE_PD,
    K_CREATE_QP,
    K_CREATE_CONNECTOR,
    K_CONNECT,
    K_COMPLETE_CONNECT,
    K_ACCEPT,
    K_DISCONNECT,
    K_DISCONNECT_EVENT,
    K_CLOSE_CONNECTOR,
    K_CLOSE_QP,
    K_CLOSE_PD,
    K_CLOSE_CQ,
    K_COUNT
};

static const char *const k_names[K_COUNT] = {
    [K_CREATE_CQ] = "NdkCreateCq",
    [K_CREATE_PD] = "NdkCreatePd",
    [K_CREATE_QP] = "NdkCreateQp",
    [K_CREATE_CONNECTOR] = "NdkCreateConnector",
    [K_CONNECT] = "NdkConnect",
    [K_COMPLETE_CONNECT] = "NdkCompleteConnect",
    [K_ACCEPT] = "NdkAccept",
    [K_DISCONNECT] = "NdkDisconnect",
    [K_DISCONNECT_EVENT] = "the disconnect event",
    [K_CLOSE_CONNECTOR] = "NdkCloseConnector",
    [K_CLOSE_QP] = "NdkCloseQp",
    [K_CLOSE_PD] = "NdkClosePd",
    [K_CLOSE_CQ] = "NdkCloseCq",
};

#endif
