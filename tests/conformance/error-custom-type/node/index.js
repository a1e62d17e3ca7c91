class PaymentRequiredError extends Error {
  constructor(message) {
    super(message);
    this.name = 'PaymentRequiredError';
  }
}

exports.handler = async () => {
  throw new PaymentRequiredError('no money');
};
